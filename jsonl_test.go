package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// halfWriter writes half of the next failing writes' bytes and fails
// them, then writes whole.
type halfWriter struct {
	bytes.Buffer
	failing int
}

func (w *halfWriter) Write(p []byte) (int, error) {
	if w.failing > 0 {
		w.failing--
		n, _ := w.Buffer.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return w.Buffer.Write(p)
}

// A fragment that cannot be taken back (the log is not a file) is left on
// a line of its own: the next record starts on a new line and parses.
func TestLineLogFragmentOnItsOwnLine(t *testing.T) {
	for _, failing := range []int{0, 1, 2} {
		tt := struct{ failing int }{failing}
		t.Run(fmt.Sprint(tt.failing), func(t *testing.T) {
			w := &halfWriter{failing: tt.failing}
			l := &lineLog{w: w}
			var errs int
			for i := 1; i <= 3; i++ {
				if err := l.append(fmt.Appendf(nil, "{\"n\":%d}\n", i)); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("append %d: %v, want ENOSPC", i, err)
					}
					errs++
				}
			}
			if errs != tt.failing || l.lostRecords() != int64(tt.failing) {
				t.Errorf("failed %d, lost %d; want %d", errs, l.lostRecords(), tt.failing)
			}
			out := w.String()
			if !strings.HasSuffix(out, "{\"n\":3}\n") {
				t.Errorf("log %q does not end in the last record, whole", out)
			}
			if got := wholeRecords(t, out); got != 3-tt.failing {
				t.Errorf("log %q holds %d whole records, want %d", out, got, 3-tt.failing)
			}
		})
	}
}

// wholeRecords counts the lines of log that are JSON objects; every other
// line must be a fragment of one.
func wholeRecords(t *testing.T, log string) int {
	t.Helper()
	n := 0
	for line := range strings.Lines(log) {
		var v map[string]any
		if json.Unmarshal([]byte(line), &v) == nil {
			n++
		} else if !strings.HasPrefix(line, "{") {
			t.Errorf("line %q is neither a record nor a fragment of one", line)
		}
	}
	return n
}

// diskLogReport is what the full-disk-log role found.
type diskLogReport struct {
	Log       string // the log file's content at the end
	Written   int    // records whose write succeeded
	Failed    int    // records whose write failed
	Lost      int64  // what the log counted
	SkipCause string `json:",omitempty"`
}

// On a full disk serve's decision log and the provider's audit log keep
// only whole records, and once space is back the next record is whole on
// a line of its own: a confined tool that fills the disk cannot make the
// later allowed calls unreadable. The disk is a small tmpfs mounted in a
// mount namespace of the test binary's own.
func TestLogsOnAFullDisk(t *testing.T) {
	for _, kind := range []string{"decision", "audit"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), roleEnv("full-disk-log", kind, dir))
			cmd.SysProcAttr = &syscall.SysProcAttr{
				Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
				UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
				GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EINVAL) {
				t.Skipf("no user namespace to mount a tmpfs in: %v", err)
			}
			if err != nil {
				t.Fatalf("full-disk-log: %v; stderr %s", err, stderr.String())
			}
			var r diskLogReport
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("report %q: %v", out, err)
			}
			if r.SkipCause != "" {
				t.Skip(r.SkipCause)
			}
			if r.Failed == 0 || r.Lost != int64(r.Failed) {
				t.Fatalf("the disk never filled, or the log counted %d lost of %d failed: %+v", r.Lost, r.Failed, r)
			}
			if !strings.HasSuffix(r.Log, "\n") {
				t.Errorf("the log ends in a fragment: %q", r.Log[max(0, len(r.Log)-80):])
			}
			if got := wholeRecords(t, r.Log); got != r.Written {
				t.Errorf("the log holds %d whole records, want the %d written", got, r.Written)
			}
			if strings.Count(r.Log, "\n") != r.Written {
				t.Errorf("the log holds %d lines for %d records: a fragment was left", strings.Count(r.Log, "\n"), r.Written)
			}
		})
	}
}

// runFullDiskLog mounts a 32 KiB tmpfs on the directory, fills it, appends
// records to a log of the kind named (decision or audit) until three fail,
// frees the disk, appends one more and prints a diskLogReport.
func runFullDiskLog(arg string) int {
	kind, dir, _ := strings.Cut(arg, ":")
	report := func(r diskLogReport) int {
		json.NewEncoder(os.Stdout).Encode(r)
		return 0
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return report(diskLogReport{SkipCause: fmt.Sprintf("make mounts private: %v", err)})
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=32k"); err != nil {
		return report(diskLogReport{SkipCause: fmt.Sprintf("mount a tmpfs: %v", err)})
	}
	l, err := openLineLog(filepath.Join(dir, "log.jsonl"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f := l.file
	audit, decisions := &providerServer{audit: l}, &decisionLog{lines: l}
	lost := func() int64 { return decisions.lines.lostRecords() }
	write := func(i int) error {
		name := fmt.Sprintf("tool-%03d-%s", i, strings.Repeat("x", 200))
		if kind == "audit" {
			lost = audit.audit.lostRecords
			return audit.record(&providerAuditRecord{RequestID: fmt.Sprint(i), ToolName: name})
		}
		return decisions.write(decisionRecord{RequestID: fmt.Sprint(i), ToolName: name, Outcome: outcomeAllowed})
	}
	// Records first, so that the log's last page is partly used and a
	// record crossing into the next page is written in part.
	var r diskLogReport
	for i := 0; i < 3; i++ {
		if err := write(i); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r.Written++
	}
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		if _, err := filler.Write(make([]byte, 1024)); err != nil {
			break
		}
	}
	for i := 3; r.Failed < 3 && i < 1000; i++ {
		if write(i) != nil {
			r.Failed++
		} else {
			r.Written++
		}
	}
	filler.Close()
	os.Remove(filler.Name())
	if err := write(1000); err != nil {
		fmt.Fprintf(os.Stderr, "write after freeing the disk: %v\n", err)
		return 1
	}
	r.Written++
	r.Lost = lost()
	data, _ := os.ReadFile(f.Name())
	r.Log = string(data)
	return report(r)
}
