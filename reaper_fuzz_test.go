// reaper_fuzz_test.go fuzzes the reader of /proc/<pid>/stat, whose command
// name another process chooses.
package main

import (
	"bytes"
	"strconv"
	"testing"
)

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("12 (sleep) S 1 12 12 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0"))
	f.Add([]byte("7 (a) Z 9 (b) ) R 3 4 5 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0"))
	f.Add([]byte("1 (\n) T 0 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseProcStat(b)
		if err != nil {
			if p != (procInfo{}) {
				t.Fatalf("error %v with a value %+v", err, p)
			}
			return
		}
		// What parses names a positive pid spelled in digits at the start, ids that are
		// not negative, and a one-byte state right after the last ')'.
		if p.pid <= 0 || p.ppid < 0 || p.pgid < 0 || p.sid < 0 {
			t.Fatalf("%q parsed to %+v", b, p)
		}
		if pid := strconv.Itoa(p.pid); !bytes.HasPrefix(bytes.TrimLeft(b, "0"), []byte(pid)) {
			t.Fatalf("%q parsed to pid %d", b, p.pid)
		}
		rest := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		if len(rest[0]) != 1 || rest[0][0] != p.state {
			t.Fatalf("%q parsed to state %q", b, p.state)
		}
	})
}

// FuzzStatPPID: only what follows the last ')' counts, so a longer comm
// before it changes nothing.
func FuzzStatPPID(f *testing.F) {
	for _, seed := range []string{
		"1234 (bash) S 1 1234 1234 34816 1234 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0",
		"77 (a) b) c) R 76 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0",
		"9 () Z 0 ",
		"9 (x) S -1 ",
		"9 (x) S 99999999999999999999 ",
		"no parenthesis",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stat []byte) {
		p, err := parseProcStat(stat)
		if err != nil {
			return
		}
		if p.ppid < 0 {
			t.Fatalf("%q: negative ppid %d", stat, p.ppid)
		}
		if again, err := parseProcStat(append([]byte("1 (s) p) q"), stat...)); err != nil || again.ppid != p.ppid {
			t.Fatalf("%q: ppid %d, after a longer comm %+v %v", stat, p.ppid, again, err)
		}
	})
}
