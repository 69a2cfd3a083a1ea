// Package console writes notifications to a terminal or log stream; the
// demo uses it so a newcomer sees an alert without configuring a robot.
package console
