// jsonl_read.go owns the one reader of the JSON-lines logs jsonl.go
// appends, serve's decision log and the provider's audit log: a record of
// either, read from whole lines only, and the filters on it. "acpguard log"
// and serve's console read the logs with it.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

const (
	// maxLogLine bounds one record: a decision line is well under 2 KiB,
	// an audit line with --audit-arguments under the wire's 1 MiB request.
	maxLogLine = 2 << 20
	// outcomeFailed selects, in a filter, every failure category.
	outcomeFailed = "failed"
)

// logFilter selects records; a zero member selects any.
type logFilter struct {
	Session string
	Tool    string
	Outcome string    // allowed, denied, failed or one failure category; "" any
	Since   time.Time // zero: from the first record
}

// logRecord is one line of either log: the members both name alike, and
// those only one has. audit is true for the provider's audit log, which
// alone has a decision member.
type logRecord struct {
	Time        string `json:"time"`
	RequestID   string `json:"requestId"`
	SessionID   string `json:"sessionId"`
	PromptID    string `json:"promptId"`
	ToolCallID  string `json:"toolCallId"`
	ToolName    string `json:"toolName"`
	Outcome     string `json:"outcome"`
	Decision    string `json:"decision"`
	Reason      string `json:"reason"`
	Rule        *int   `json:"rule"`
	Shadow      bool   `json:"shadow"`
	WouldDecide string `json:"wouldDecide"`

	audit bool
	at    time.Time
}

// parseLogRecord reads one line of either log. Members it does not know
// are skipped, so that lines of other versions read; a line without a time
// and an outcome or decision is not a record.
func parseLogRecord(line []byte) (logRecord, error) {
	var r logRecord
	var probe struct {
		Decision *string `json:"decision"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, errors.New("not a JSON record")
	}
	json.Unmarshal(line, &probe)
	r.audit = probe.Decision != nil
	if r.Outcome == "" && r.audit {
		// An audit line written before the outcome member was.
		r.Outcome = outcomeDenied
		if r.Decision == "allow" {
			r.Outcome = outcomeAllowed
		}
	}
	at, err := time.Parse(time.RFC3339Nano, r.Time)
	switch {
	case err != nil:
		return r, fmt.Errorf("time %q: not RFC 3339", r.Time)
	case r.Outcome == "":
		return r, errors.New("no outcome or decision")
	}
	r.at = at
	return r, nil
}

// failed reports whether the record is a failure category, neither an
// allow nor a denial.
func (r *logRecord) failed() bool {
	return r.Outcome != outcomeAllowed && r.Outcome != outcomeDenied
}

// keep applies the filter.
func (o *logFilter) keep(r *logRecord) bool {
	switch {
	case o.Session != "" && r.SessionID != o.Session,
		o.Tool != "" && r.ToolName != o.Tool,
		!o.Since.IsZero() && r.at.Before(o.Since):
		return false
	case o.Outcome == "", o.Outcome == r.Outcome:
		return true
	}
	return o.Outcome == outcomeFailed && r.failed()
}

// logReader reads the lines of one log file, whole lines only: a line
// still being written waits for its newline.
type logReader struct {
	name     string
	f        *os.File
	r        *bufio.Reader
	line     int    // lines read
	offset   int64  // bytes of whole lines read
	buf      []byte // the line being read
	pending  int64  // bytes of it read, kept or not
	overlong bool   // it is longer than maxLogLine: skipped to its end
}

// errLogLineTooLong is a line longer than maxLogLine.
var errLogLineTooLong = fmt.Errorf("longer than %d bytes", maxLogLine)

func openLogReader(name string) (*logReader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("log %q: %w", name, err)
	}
	return &logReader{name: name, f: f, r: bufio.NewReaderSize(f, 64<<10)}, nil
}

// next returns the next whole line; io.EOF when none is complete yet,
// errLogLineTooLong for a line it skipped.
func (lr *logReader) next() ([]byte, error) {
	for {
		chunk, err := lr.r.ReadSlice('\n')
		lr.pending += int64(len(chunk))
		if !lr.overlong && len(lr.buf)+len(chunk) > maxLogLine {
			lr.overlong, lr.buf = true, nil
		}
		if !lr.overlong {
			lr.buf = append(lr.buf, chunk...)
		}
		switch {
		case err == nil:
			lr.line++
			lr.offset, lr.pending = lr.offset+lr.pending, 0
			line, overlong := lr.buf, lr.overlong
			lr.buf, lr.overlong = nil, false
			if overlong {
				return nil, errLogLineTooLong
			}
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil, io.EOF
		default:
			return nil, fmt.Errorf("read log %q: %w", lr.name, err)
		}
	}
}

// reopenIfTruncated starts over when the file shrank below what was read
// (rotated by copy and truncate).
func (lr *logReader) reopenIfTruncated() {
	st, err := lr.f.Stat()
	if err != nil || st.Size() >= lr.offset+lr.pending {
		return
	}
	lr.f.Seek(0, io.SeekStart)
	lr.r.Reset(lr.f)
	lr.buf, lr.offset, lr.pending, lr.overlong = nil, 0, 0, false
}

// openLogReaderTail opens a log to read its records in the last tail bytes
// only: a line cut at that point is skipped whole.
func openLogReaderTail(name string, tail int64) (*logReader, error) {
	lr, err := openLogReader(name)
	if err != nil {
		return nil, err
	}
	st, err := lr.f.Stat()
	if err != nil {
		lr.f.Close()
		return nil, fmt.Errorf("log %q: %w", name, err)
	}
	if start := st.Size() - tail; start > 0 {
		// Start on the byte before, so that a line starting exactly at
		// start is kept: the skip ends after that byte's line.
		if _, err := lr.f.Seek(start-1, io.SeekStart); err != nil {
			lr.f.Close()
			return nil, fmt.Errorf("log %q: %w", name, err)
		}
		if _, err := lr.r.ReadBytes('\n'); err != nil && !errors.Is(err, io.EOF) {
			lr.f.Close()
			return nil, fmt.Errorf("read log %q: %w", name, err)
		}
	}
	return lr, nil
}
