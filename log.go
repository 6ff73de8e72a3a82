// log.go owns "acpguard log": reading serve's decision log and the
// provider's audit log with their one reader (jsonl_read.go), joining the
// two on the request id, following and summing them up. A line that is
// not a record is reported and skipped.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Limits of "acpguard log" beyond its reader's (jsonl_read.go).
const (
	// logFollowPoll is how often --follow looks for more lines.
	logFollowPoll = 200 * time.Millisecond
	// logTopReasons is how many deny reasons --summary lists.
	logTopReasons = 5
)

// logOptions is what "acpguard log" was asked (config_log.go parses it).
type logOptions struct {
	Files   []string
	Follow  bool
	Summary bool
	logFilter
}

// logSummary counts what --summary prints.
type logSummary struct {
	tools    map[string]*logCounts
	sessions map[string]*logCounts
	reasons  map[string]int
}

type logCounts struct{ allowed, denied, failed int }

func (c *logCounts) add(r *logRecord) {
	switch {
	case r.Outcome == outcomeAllowed:
		c.allowed++
	case r.Outcome == outcomeDenied:
		c.denied++
	default:
		c.failed++
	}
}

func (s *logSummary) add(r *logRecord) {
	for _, m := range []struct {
		counts map[string]*logCounts
		key    string
	}{{s.tools, r.ToolName}, {s.sessions, r.SessionID}} {
		c := m.counts[m.key]
		if c == nil {
			c = &logCounts{}
			m.counts[m.key] = c
		}
		c.add(r)
	}
	if r.Outcome == outcomeDenied {
		s.reasons[r.Reason]++
	}
}

func (s *logSummary) write(w io.Writer) {
	table := func(title string, m map[string]*logCounts) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "%-40s %8s %8s %8s\n", title, "allowed", "denied", "failed")
		for _, k := range keys {
			c := m[k]
			fmt.Fprintf(w, "%-40s %8d %8d %8d\n", visibleText(k), c.allowed, c.denied, c.failed)
		}
	}
	table("tool", s.tools)
	fmt.Fprintln(w)
	type reason struct {
		text string
		n    int
	}
	var rs []reason
	for text, n := range s.reasons {
		rs = append(rs, reason{text, n})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].n > rs[j].n || rs[i].n == rs[j].n && rs[i].text < rs[j].text })
	fmt.Fprintln(w, "top deny reasons")
	for i, r := range rs {
		if i == logTopReasons {
			break
		}
		fmt.Fprintf(w, "%8d  %s\n", r.n, visibleText(r.text))
	}
	fmt.Fprintln(w)
	table("session", s.sessions)
}

// formatLogRecord is one record as text: time, outcome, tool, the ids, the
// rule of the provider's policy where the audit log gave it, the reason.
func formatLogRecord(r *logRecord) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-9s %s session=%s prompt=%s call=%s", r.at.UTC().Format(time.RFC3339Nano), visibleText(r.Outcome),
		visibleText(r.ToolName), visibleText(r.SessionID), visibleText(r.PromptID), visibleText(r.ToolCallID))
	if r.RequestID != "" {
		fmt.Fprintf(&b, " request=%s", visibleText(r.RequestID))
	}
	if r.Rule != nil {
		if *r.Rule < 0 {
			b.WriteString(" rule=default")
		} else {
			fmt.Fprintf(&b, " rule=%d", *r.Rule)
		}
	}
	if r.Shadow {
		fmt.Fprintf(&b, " shadow=%s", visibleText(r.WouldDecide))
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", strconv.Quote(r.Reason))
	}
	return b.String()
}

// logRun is one "acpguard log": its files, what it joined, what it skipped.
type logRun struct {
	o       logOptions
	sys     *system
	readers []*logReader
	// byRequest holds, by request id, a record whose line of the other log
	// has not been read yet.
	byRequest map[string]*logRecord
	broken    int // lines that were not records
}

// join merges r into the record of the other log with its request id,
// and reports whether it did: the decision log's record stays, with the
// rule (and, for a line written before the decision log had one, the
// reason) of the audit's.
func (l *logRun) join(r *logRecord) bool {
	first := l.byRequest[r.RequestID]
	if r.RequestID == "" || first == nil || first.audit == r.audit {
		if r.RequestID != "" {
			l.byRequest[r.RequestID] = r
		}
		return false
	}
	dec, aud := *r, *first
	if r.audit {
		dec, aud = *first, *r
	}
	if dec.Reason == "" {
		dec.Reason = aud.Reason
	}
	dec.Rule, dec.Shadow, dec.WouldDecide = aud.Rule, aud.Shadow, aud.WouldDecide
	*first = dec
	delete(l.byRequest, r.RequestID)
	return true
}

// readAll reads every whole line the files hold now and emits each record
// the filters keep; a line that is not a record is reported and counted.
func (l *logRun) readAll(emit func(*logRecord)) error {
	for _, lr := range l.readers {
		for {
			line, err := lr.next()
			if errors.Is(err, io.EOF) {
				break
			}
			var r logRecord
			perr := err
			switch {
			case errors.Is(err, errLogLineTooLong):
			case err != nil:
				return err
			case len(bytes.TrimSpace(line)) == 0:
				continue
			default:
				r, perr = parseLogRecord(line)
			}
			if perr != nil {
				l.broken++
				fmt.Fprintf(l.sys.stderr, "acpguard log: %q line %d: %v: skipped\n", lr.name, lr.line, perr)
				continue
			}
			if l.o.keep(&r) {
				emit(&r)
			}
		}
	}
	return nil
}

// runLogRead reads the files in the order given and prints their records
// in time order, or their summary; then, with --follow, what is appended
// to them until ctx ends. It returns the number of lines that were not
// records.
func runLogRead(ctx context.Context, sys *system, o logOptions) (broken int, err error) {
	l := &logRun{o: o, sys: sys, byRequest: map[string]*logRecord{}}
	for _, name := range o.Files {
		lr, err := openLogReader(name)
		if err != nil {
			return 0, err
		}
		defer lr.f.Close()
		l.readers = append(l.readers, lr)
	}
	var records []*logRecord
	if err := l.readAll(func(r *logRecord) {
		if !l.join(r) {
			records = append(records, r)
		}
	}); err != nil {
		return l.broken, err
	}
	sort.SliceStable(records, func(i, j int) bool { return records[i].at.Before(records[j].at) })
	sum := &logSummary{tools: map[string]*logCounts{}, sessions: map[string]*logCounts{}, reasons: map[string]int{}}
	for _, r := range records {
		if o.Summary {
			sum.add(r)
		} else {
			fmt.Fprintln(sys.stdout, formatLogRecord(r))
		}
	}
	if o.Summary {
		sum.write(sys.stdout)
	}
	if !o.Follow {
		return l.broken, nil
	}
	tick := time.NewTicker(logFollowPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return l.broken, nil
		case <-tick.C:
		}
		for _, lr := range l.readers {
			lr.reopenIfTruncated()
		}
		if err := l.readAll(func(r *logRecord) { fmt.Fprintln(sys.stdout, formatLogRecord(r)) }); err != nil {
			return l.broken, err
		}
	}
}
