package sourcefile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScanLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200<<10) // past the reader's own buffer
	cases := []struct {
		name, src string
		want      string
	}{
		{"empty", "", ""},
		{"lines", "a\n\nbc\n", "1:a:ended:2 2::ended:3 3:bc:ended:6"},
		{"torn last", "a\nbc", "1:a:ended:2 2:bc:torn:4"},
		{"at the limit", "abcd\n", "1:abcd:ended:5"},
		{"over the limit", "abcde\nf\n", "1:LONG:ended:6 2:f:ended:8"},
		{"long past the buffer", long + "\nf", fmt.Sprintf("1:LONG:ended:%d 2:f:torn:%d", len(long)+1, len(long)+2)},
		{"long torn", "a\n" + long, fmt.Sprintf("1:a:ended:2 2:LONG:torn:%d", len(long)+2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := ScanLines(strings.NewReader(tc.src), 4, func(l Line) error {
				text, end := string(l.Text), "torn"
				if l.Long {
					text = "LONG"
				}
				if l.Ended {
					end = "ended"
				}
				got = append(got, fmt.Sprintf("%d:%s:%s:%d", l.N, text, end, l.End))
				return nil
			})
			if err != nil || strings.Join(got, " ") != tc.want {
				t.Fatalf("ScanLines = %q, %v; want %q", strings.Join(got, " "), err, tc.want)
			}
		})
	}
}

// FuzzScanLines: the lines ScanLines gives put back together are the
// input, a line is never held past the limit, and End is where it ends.
func FuzzScanLines(f *testing.F) {
	for _, s := range []string{"", "\n", "a\nb", "abcdefgh\n\n", "\x00\xff\r\n"} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, src []byte, max int) {
		max = max&0xff + 1
		var b bytes.Buffer
		last := int64(0)
		err := ScanLines(bytes.NewReader(src), max, func(l Line) error {
			if len(l.Text) > max || (l.Long && l.Text != nil) {
				t.Fatalf("line %d: %q long=%v past the limit %d", l.N, l.Text, l.Long, max)
			}
			line := src[last:l.End]
			if !l.Long && !bytes.Equal(bytes.TrimSuffix(line, []byte{'\n'}), l.Text) {
				t.Fatalf("line %d = %q, the input has %q", l.N, l.Text, line)
			}
			b.Write(line)
			last = l.End
			return nil
		})
		if err != nil || !bytes.Equal(b.Bytes(), src) {
			t.Fatalf("ScanLines covered %q of %q, err %v", b.Bytes(), src, err)
		}
	})
}

func TestReadOwn(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "alerts.json")
	if err := os.WriteFile(p, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadOwn(p, "alert state file", 4)
	var tl *TooLargeError
	if !errors.As(err, &tl) || err.Error() != "read "+p+": larger than 4 bytes, more than the server ever writes in its alert state file: it was replaced or damaged" {
		t.Fatalf("err = %v", err)
	}
	_, err = ReadOwn("/dev/zero", "alert state file", 4)
	var pe *fs.PathError
	if !errors.As(err, &pe) || err.Error() != "read /dev/zero: is a device, not the regular file the server writes as its alert state file: it was replaced" {
		t.Fatalf("err = %v", err)
	}
	if _, err := OpenOwn("/dev/zero", "outbox"); err == nil || !strings.Contains(err.Error(), "is a device") {
		t.Fatalf("OpenOwn(/dev/zero) = %v", err)
	}
}
