// serve_peer_fuzz_test.go fuzzes the reader of the kernel's /proc text that
// links serve to its descendants. The socket table and sock_diag decoders
// it also uses are fuzzed with the provider identity check.
package main

import "testing"

func FuzzStatPPID(f *testing.F) {
	for _, seed := range []string{
		"1234 (bash) S 1 1234 1234 34816 1234 4194304 ...",
		"77 (a) b) c) R 76 77 77 0 -1",
		"9 () Z 0 ",
		"9 (x) S -1 ",
		"9 (x) S 99999999999999999999 ",
		"no parenthesis",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stat []byte) {
		ppid, ok := parseStatPPID(stat)
		if !ok {
			return
		}
		if ppid < 0 {
			t.Fatalf("%q: negative ppid %d", stat, ppid)
		}
		// Only what follows the last ')' counts: a longer comm before it
		// changes nothing.
		if again, ok := parseStatPPID(append([]byte("1 (s) p) q"), stat...)); !ok || again != ppid {
			t.Fatalf("%q: ppid %d, after a longer comm %d %v", stat, ppid, again, ok)
		}
	})
}
