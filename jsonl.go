// jsonl.go owns the one appender of JSON-lines logs, serve's decision log
// and the provider's audit log: a record reaches the file whole or not at
// all, so the file always ends in a whole line, whatever a full disk did to
// the last write, and every record after it parses.
package main

import (
	"io"
	"os"
	"sync"
)

// The outcomes of a decision both logs name the same way (an "outcome"
// member), so that one reader reads either.
const (
	outcomeAllowed = "allowed"
	outcomeDenied  = "denied"
)

// lineLog appends one record per line to w, one record at a time. It is
// safe for concurrent use.
type lineLog struct {
	mu sync.Mutex
	w  io.Writer
	// file is w when the log opened it (openLineLog), nil for a stream it
	// shares (standard output or error): only a file of its own is ever
	// truncated, since another writer's line could follow a fragment.
	file *os.File
	// broken is set when a failed write left a fragment that could not be
	// taken back (w is a stream, or truncating it failed): the next record
	// then starts on a new line, so the fragment stays a line of its own
	// that a reader reports and skips.
	broken bool
	lost   int64 // records that did not reach w whole
}

// openLineLog opens the log file at path for appending, creating it
// readable by its owner only.
func openLineLog(path string) (*lineLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &lineLog{w: f, file: f}, nil
}

// close closes the log's file, when it opened one.
func (l *lineLog) close() error {
	if l.file == nil {
		return nil
	}
	return l.file.Close()
}

// append writes line, which ends in a newline. A failed or short write is
// taken back by truncating the log's own file by the bytes it left, and the
// record counts as lost; the error says what failed.
func (l *lineLog) append(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken {
		line = append([]byte{'\n'}, line...)
	}
	n, err := l.w.Write(line)
	if err == nil && n == len(line) {
		l.broken = false
		return nil
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	l.lost++
	if n > 0 && (l.file == nil || l.takeBack(n) != nil) {
		l.broken = true
	}
	return err
}

// takeBack truncates the log's file by the n bytes a failed write left at
// its end. The file is open for appending, so its offset is that end: no
// write needs a seek of its own beforehand.
func (l *lineLog) takeBack(n int) error {
	end, err := l.file.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	return l.file.Truncate(end - int64(n))
}

// lostRecords is how many records did not reach the log whole.
func (l *lineLog) lostRecords() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}
