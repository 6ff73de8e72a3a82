// shell_parse_test.go pins parseShell's output (testdata/shell/vectors.json),
// the wrapper see-through, and fuzzes the parser.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shellVector is one pinned parse. Regenerate with
// ACPGUARD_UPDATE_SHELL_VECTORS=1 after checking the difference by eye.
type shellVector struct {
	Src      string         `json:"src"`
	Commands []shellCommand `json:"commands"`
	Complex  bool           `json:"complex"`
	Err      string         `json:"err,omitempty"`
}

var shellVectorSources = []string{
	// plain
	"ls", "ls -la /tmp", "  git   status  ", "git\tlog\t-n 3", "echo", "",
	// quoted and escaped
	"'touch' F", "t''ouch F", `\touch F`, `"git" "log"`, `echo 'a b' "c d" e\ f`,
	`echo "a\"b" 'c\d' "e\$f"`, `echo $'a\nb\x41\101\u00e9'`, `echo $"x y"`, "echo a\\\nb", "ec\\\nho hi",
	`echo "$HOME" '$HOME'`, `git log '--output=/elsewhere/file'`,
	// comments
	"echo hi #'\ntouch X\n#'", "echo a#b", "echo hi # comment && rm x", "# only a comment",
	// compound
	"git status && rm -rf /", "a || b; c | d |& e & f\ng", "a;b;c", "a &", "! true",
	// subshells and groups
	"(cd x; rm y)", "{ rm x; }", "( (a) )", "{ a; } && (b)", "(ls) > out",
	// brace expansion
	"{touch,F}", "X=1 {touch,F}", "echo {a,b}{1,2}", "echo {1..3} {a..c}", "echo x{,.bak}", "find . -exec rm {} +", "echo '{a,b}'",
	// assignments
	"X=1 Y='a b' env", "X=1", "FOO=bar git status", "a=(1 2) ls", "X=$(id) ls",
	// redirections
	"ls > out 2>&1", "ls >> out", "cat < in", "ls 2>/dev/null", "ls &>all", "ls >|clobber", "cat <> rw", "exec 3>&-", ">out echo hi", "cat <<< 'text'",
	"cat f </dev/tcp/127.0.0.1/80 >&0", "exec 3<>/dev/udp/h/53", "cat <$T", "cat <~/x", "ls >/tmp/*.log", "cat </dev/{tcp,udp}/h/p",
	"{ cat f; } </dev/tcp/h/p >&0", "cat 2>&$FD", "cat <<<$T",
	// here-documents
	"cat <<EOF\nrm x\nEOF", "cat <<'EOF'\n$(rm x)\nEOF", "cat <<EOF\n$(rm x)\nEOF\nls", "cat <<-EOF\n\tbody\n\tEOF", "bash <<EOF\nrm x\nEOF",
	// substitutions and expansions
	"echo $(rm -rf /)", "echo `rm z`", `echo "x $(rm -rf /) y"`, "diff <(ls a) >(ls b)", "echo $((1+2))", "echo ${x:-$(id)}",
	"$CMD arg", "${CMD} arg", "~/bin/tool", "*.sh", "echo *.go", "ls $DIR", "/bin/rm -rf x",
	// wrappers
	"command touch F", "exec touch F", "env touch F", "env -i X=1 touch F", "sudo -u root rm x", "nice -n 5 rm x", "nohup rm x &",
	"timeout -s KILL 5s rm x", "xargs -0 rm", "doas rm x", "stdbuf -oL rm x", "time rm x", "command -v git",
	// scripts
	"bash -c 'rm x; ls'", "sh -c \"$CMD\"", "su -c 'rm y' root", "bash -c 'echo $(id)'", "sh script.sh",
	// eval and friends
	"eval rm x", "source ./env.sh", ". ./env.sh", "alias ls='rm -rf'", "trap 'rm x' EXIT",
	// functions, arithmetic, tests, control structures
	"f() { rm x; }", "function f { rm x; }", "((i++))", "[[ -f a && -n $b ]] && ls", "[ -f a ] && ls",
	"if true; then rm x; elif false; then ls; else pwd; fi", "for i in a b; do rm $i; done", "while read l; do echo $l; done < f",
	"case $x in a|b) rm a;; *) ls;; esac",
	// syntax errors
	`echo "unterminated`, "echo 'open", "echo $(ls", "ls )", "if true; then ls", "cat <<EOF\nno end", "ls |",
}

func TestShellParseVectors(t *testing.T) {
	file := filepath.Join("testdata", "shell", "vectors.json")
	var got []shellVector
	for _, src := range shellVectorSources {
		cmds, complex, err := parseShell(src)
		v := shellVector{Src: src, Commands: cmds, Complex: complex}
		if err != nil {
			v.Err = err.Error()
		}
		got = append(got, v)
	}
	if len(got) < 60 {
		t.Fatalf("only %d vectors", len(got))
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("ACPGUARD_UPDATE_SHELL_VECTORS") != "" {
		if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var wantV []shellVector
	if err := json.Unmarshal(want, &wantV); err != nil {
		t.Fatal(err)
	}
	if len(wantV) != len(got) {
		t.Fatalf("%d vectors in %s, %d sources", len(wantV), file, len(got))
	}
	for i := range got {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(wantV[i])
		if string(g) != string(w) {
			t.Errorf("%q:\n got %s\nwant %s", got[i].Src, g, w)
		}
	}
}

func TestShellCommandName(t *testing.T) {
	for _, tc := range []struct {
		src, name string
		inner     []string // expandWrappers, each argv joined by spaces
	}{
		{"/bin/rm x", "rm", nil},
		{"command rm x", "rm", []string{"rm x"}},
		{"command -v rm", "command", nil},
		{"env -u A -i X=1 -- rm x", "rm", []string{"rm x"}},
		{"exec -a name rm x", "rm", []string{"rm x"}},
		{"nice -n 5 rm x", "rm", []string{"rm x"}},
		{"nice -5 rm x", "rm", []string{"rm x"}},
		{"nohup rm x", "rm", []string{"rm x"}},
		{"timeout --signal=KILL -k 1 5m rm x", "rm", []string{"rm x"}},
		{"xargs -n 1 -I{} rm {}", "rm", []string{"rm {}"}},
		{"xargs", "echo", []string{"echo"}},
		{"sudo -u root -E X=1 /usr/bin/rm x", "rm", []string{"/usr/bin/rm x"}},
		{"sudo -l", "sudo", nil},
		{"doas -u root rm x", "rm", []string{"rm x"}},
		{"stdbuf -o L rm x", "rm", []string{"rm x"}},
		{"time -p rm x", "rm", []string{"rm x"}},
		{"sudo nice nohup env rm x", "rm", []string{"rm x"}},
		{"su -c 'rm x; ls' root", "su", []string{"rm x", "ls"}},
		{"su - root -c 'rm x'", "su", []string{"rm x"}},
		{"bash -o pipefail -c 'sudo rm x'", "bash", []string{"sudo rm x", "rm x"}},
		{"bash -lc 'rm x'", "bash", []string{"rm x"}},
		{"find . -name '*.o' -exec rm -f {} ';' -execdir touch {} +", "find", []string{"rm -f {}", "touch {}"}},
		{"sudo find . -exec sh -c 'rm x' ';'", "find", []string{"find . -exec sh -c rm x ;", "sh -c rm x", "rm x"}},
		{"bash script.sh", "bash", nil},
	} {
		cmds, _, err := parseShell(tc.src)
		if err != nil || len(cmds) != 1 {
			t.Fatalf("%q: %v %v", tc.src, cmds, err)
		}
		if got := commandName(cmds[0]); got != tc.name {
			t.Errorf("commandName(%q) = %q, want %q", tc.src, got, tc.name)
		}
		var inner []string
		for _, c := range expandWrappers(cmds[0]) {
			inner = append(inner, strings.Join(c.Argv, " "))
		}
		if !slices.Equal(inner, tc.inner) {
			t.Errorf("expandWrappers(%q) = %q, want %q", tc.src, inner, tc.inner)
		}
	}
}

// TestShellParseBounds: inputs past the bounds are refused, quickly.
func TestShellParseBounds(t *testing.T) {
	for _, src := range []string{
		strings.Repeat("a", maxShellInput+1),
		strings.Repeat("(", 1000) + "ls" + strings.Repeat(")", 1000),
		strings.Repeat("$(", 1000) + "ls" + strings.Repeat(")", 1000),
		strings.Repeat("ls;", maxShellCommands+1),
	} {
		if _, complex, err := parseShell(src); err == nil && !complex {
			t.Errorf("%.40q...: no error and not complex", src)
		}
	}
	if cmds, _, _ := parseShell("echo {1..100000}"); len(cmds) != 1 || len(cmds[0].Argv) > maxShellBraces+1 {
		t.Errorf("a huge brace sequence expanded into %d words", len(cmds[0].Argv))
	}
}

// quoteAll single-quotes every word, so that nothing in it is special.
func quoteAll(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func FuzzShellParse(f *testing.F) {
	for _, s := range shellVectorSources {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		cmds, complex, err := parseShell(src)
		if err != nil && !complex {
			t.Fatalf("%q: an error but not complex", src)
		}
		for _, c := range cmds {
			for _, x := range expandWrappers(c) {
				_ = commandName(x)
			}
			if c.Complex || len(c.Argv) == 0 {
				continue
			}
			again, cx, err := parseShell(quoteAll(c.Argv))
			if err != nil || cx || len(again) != 1 || !slices.Equal(again[0].Argv, c.Argv) {
				t.Fatalf("%q: argv %q re-quoted parses as %+v (complex %v, %v)", src, c.Argv, again, cx, err)
			}
		}
	})
}
