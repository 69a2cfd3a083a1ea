// The server's clock, as the page estimates it. Times the server sends
// (an alert's firing, a task's update, the last evaluation) are measured
// against it, not against the browser's clock, which may be off by hours:
// a laptop two hours ahead showed an alert that had just fired as "2h
// ago", an alert engine that had just evaluated as "no evaluation for 2h",
// and no task in the last 15 minutes.
let offset = 0; // the server's clock minus the browser's, in ms

// serverNow is the server's time now, in Unix milliseconds.
export const serverNow = () => Date.now() + offset;

// setServerTime takes the server's time just received (the stream's
// hello): the estimate is off by the time the message took, not by hours.
export function setServerTime(ms) {
  if (Number.isFinite(ms) && ms > 0) offset = ms - Date.now();
}
