package main

import (
	"bytes"
	"io"
	"os"
	"strings"
)

// quietLog is the grader's progress log as a grading without -v shows it:
// each task's first line (what the task is) in full, and the lines of its
// stages only on a terminal, each drawn over the one before and cleared
// at the end, so that they say what is going on without staying on the
// screen. Elsewhere (a CI log, a pipe) only the tasks' lines are written.
type quietLog struct {
	w       io.Writer
	tty     bool
	partial []byte // a line not ended yet
	drawn   bool   // a stage line is on the screen, to clear
}

// quietWidth is the most runes of a stage line drawn on a terminal, so
// that it fits one row.
const quietWidth = 100

func newQuietLog(w io.Writer) *quietLog { return &quietLog{w: w, tty: isTerminal(w)} }

// Write takes the log's text, whole lines or not.
func (q *quietLog) Write(p []byte) (int, error) {
	q.partial = append(q.partial, p...)
	for {
		i := bytes.IndexByte(q.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(q.partial[:i])
		q.partial = q.partial[i+1:]
		if err := q.line(line); err != nil {
			return len(p), err
		}
	}
}

func (q *quietLog) line(l string) error {
	if !strings.HasPrefix(l, " ") {
		if err := q.Clear(); err != nil {
			return err
		}
		_, err := io.WriteString(q.w, l+"\n")
		return err
	}
	if !q.tty {
		return nil
	}
	l = strings.TrimSpace(l)
	if r := []rune(l); len(r) > quietWidth {
		l = string(r[:quietWidth-1]) + "…"
	}
	q.drawn = true
	_, err := io.WriteString(q.w, "\r\033[K  "+l)
	return err
}

// Clear removes the stage line drawn last, if any.
func (q *quietLog) Clear() error {
	if !q.drawn {
		return nil
	}
	q.drawn = false
	_, err := io.WriteString(q.w, "\r\033[K")
	return err
}

// isTerminal reports whether w is a terminal that takes cursor movements:
// not with NO_COLOR set or TERM=dumb.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	return os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}
