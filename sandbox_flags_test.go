// sandbox_flags_test.go tests how the operator chooses the sandbox: every
// --sandbox* flag and tools.sandbox* settings value (accepted, or refused
// with its exact text and exit 2), their precedence, the defaults of each
// guard mode against kernels with and without Landlock (exit 1 or one
// warning), and the narrowing rule of a workspace settings file.
package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// parseSandboxArgs parses args as acp (cmd "acp") or serve does, and
// returns the sandbox they choose.
func parseSandboxArgs(cmd string, args []string, env ...string) (sandboxConfig, error) {
	sys, _, _ := testSystem(env...)
	if cmd == "acp" {
		o, err := parseACPArgs(args, sys)
		return o.Sandbox, err
	}
	o, err := parseServeArgs(append([]string{"--workspace", os.TempDir()}, args...), sys)
	return o.Sandbox, err
}

func TestSandboxFlagsAndSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	guardEnv := envGuardToken + "=" + testToken
	req := required("http://127.0.0.1:1")
	ws := []string{"--sandbox", "workspace"}
	on := sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Network: sandboxAll, Unix: sandboxAll}
	with := func(f func(*sandboxConfig)) sandboxConfig {
		c := on
		f(&c)
		return c
	}
	manyPaths := []string{}
	for range maxSandboxPaths + 1 {
		manyPaths = append(manyPaths, "--sandbox-read", dir)
	}

	tests := []struct {
		name     string
		args     []string
		settings string // a settings file's text, "" for none
		env      []string
		want     sandboxConfig
		wantErr  string // the exact error; %s is the settings file's path
	}{
		// Defaults.
		{name: "off mode default", want: sandboxConfig{Profile: sandboxOff}},
		{name: "required mode default", args: req, env: []string{guardEnv},
			want: sandboxConfig{Profile: sandboxWorkspace, Network: sandboxAll, Unix: sandboxAll}},
		// --sandbox.
		{name: "workspace in off mode", args: ws, want: on},
		{name: "off in required mode", args: append(req, "--sandbox", "off"), env: []string{guardEnv},
			want: sandboxConfig{Profile: sandboxOff, Explicit: true}},
		{name: "container name", args: []string{"--sandbox", "docker"}, wantErr: `--sandbox "docker": must be off or workspace`},
		{name: "empty", args: []string{"--sandbox="}, wantErr: `--sandbox "": must be off or workspace`},
		{name: "true", args: []string{"--sandbox", "true"}, wantErr: `--sandbox "true": must be off or workspace`},
		{name: "given twice", args: []string{"--sandbox", "workspace", "--sandbox", "off"}, wantErr: `flag "--sandbox" given more than once; run "acpguard CMD --help"`},
		// --sandbox-read.
		{name: "read paths cleaned and deduplicated", args: append(ws, "--sandbox-read", "/usr/", "--sandbox-read", dir, "--sandbox-read", "//usr"),
			want: with(func(c *sandboxConfig) { c.Read = []string{"/usr", dir} })},
		{name: "read a file", args: append(ws, "--sandbox-read", file), want: with(func(c *sandboxConfig) { c.Read = []string{file} })},
		{name: "read relative", args: append(ws, "--sandbox-read", "usr"), wantErr: fmt.Sprintf(`--sandbox-read "usr": must be an absolute path, such as %q`, filepath.Join(wd, "usr"))},
		{name: "read dot-dot", args: append(ws, "--sandbox-read", "/usr/../etc"), wantErr: `--sandbox-read "/usr/../etc": must not contain . or .. (write "/etc")`},
		{name: "read dot", args: append(ws, "--sandbox-read", "/usr/./lib"), wantErr: `--sandbox-read "/usr/./lib": must not contain . or .. (write "/usr/lib")`},
		{name: "read missing", args: append(ws, "--sandbox-read", dir+"/nope"), wantErr: fmt.Sprintf(`--sandbox-read %q: does not exist: list only paths that exist`, dir+"/nope")},
		{name: "read empty", args: append(ws, "--sandbox-read", ""), wantErr: `--sandbox-read "": must name a path`},
		{name: "read too many", args: append(ws, manyPaths...), wantErr: fmt.Sprintf(`--sandbox-read %q: is one path too many: at most %d are allowed, each costs a Landlock rule at every process start`, dir, maxSandboxPaths)},
		// --sandbox-write.
		{name: "write dirs", args: append(ws, "--sandbox-write", dir, "--sandbox-write", dir+"/"),
			want: with(func(c *sandboxConfig) { c.Write = []string{dir} })},
		{name: "write a file", args: append(ws, "--sandbox-write", file), wantErr: fmt.Sprintf(`--sandbox-write %q: is not a directory: a writable path must be an existing directory`, file)},
		{name: "write missing", args: append(ws, "--sandbox-write", dir+"/cache"), wantErr: fmt.Sprintf(`--sandbox-write %q: does not exist: create the directory first, or leave it out`, dir+"/cache")},
		{name: "write root", args: append(ws, "--sandbox-write", "/"), wantErr: `--sandbox-write "/": would make the whole filesystem writable: pass --sandbox off to leave writes unconfined`},
		{name: "write relative", args: append(ws, "--sandbox-write", "."), wantErr: fmt.Sprintf(`--sandbox-write ".": must be an absolute path, such as %q`, wd)},
		// --sandbox-network and --sandbox-unix.
		{name: "network none", args: append(ws, "--sandbox-network", "none"),
			want: with(func(c *sandboxConfig) { c.Network, c.NetworkExplicit = sandboxNone, true })},
		{name: "network all", args: append(ws, "--sandbox-network", "all"),
			want: with(func(c *sandboxConfig) { c.NetworkExplicit = true })},
		{name: "network closed", args: append(ws, "--sandbox-network", "closed"), wantErr: `--sandbox-network "closed": must be all or none`},
		{name: "network twice", args: append(ws, "--sandbox-network", "none", "--sandbox-network", "all"), wantErr: `flag "--sandbox-network" given more than once; run "acpguard CMD --help"`},
		{name: "unix none", args: append(ws, "--sandbox-unix", "none"), want: with(func(c *sandboxConfig) { c.Unix = sandboxNone })},
		{name: "unix NONE", args: append(ws, "--sandbox-unix", "NONE"), wantErr: `--sandbox-unix "NONE": must be all or none`},
		// Options that take something away ask for the sandbox.
		{name: "required default with a read list", args: append(req, "--sandbox-read", "/usr"), env: []string{guardEnv},
			want: with(func(c *sandboxConfig) { c.Read = []string{"/usr"} })},
		{name: "required default with network none", args: append(req, "--sandbox-network", "none"), env: []string{guardEnv},
			want: with(func(c *sandboxConfig) { c.Network, c.NetworkExplicit = sandboxNone, true })},
		{name: "required default with a write path", args: append(req, "--sandbox-write", dir), env: []string{guardEnv},
			want: with(func(c *sandboxConfig) { c.Explicit, c.Write = false, []string{dir} })},
		// Options without the sandbox.
		{name: "read with --sandbox off", args: []string{"--sandbox", "off", "--sandbox-read", "/usr"},
			wantErr: `--sandbox-read "/usr": confines nothing with --sandbox off; drop it, or pass --sandbox workspace`},
		{name: "network in off mode", args: []string{"--sandbox-network", "none"},
			wantErr: `--sandbox-network "none": confines nothing: the sandbox is off by default with --external-tool-guard-mode off; add --sandbox workspace`},
		{name: "write in off mode", args: []string{"--sandbox-write", dir},
			wantErr: fmt.Sprintf(`--sandbox-write %q: confines nothing: the sandbox is off by default with --external-tool-guard-mode off; add --sandbox workspace`, dir)},
		{name: "unix with settings false", args: []string{"--sandbox-unix", "none"}, settings: `{"tools":{"sandbox":false}}`,
			wantErr: `--sandbox-unix "none": confines nothing with tools.sandbox false in settings %q; drop it, or pass --sandbox workspace`},
		// tools.sandbox.
		{name: "settings true", settings: `{"tools":{"sandbox":true}}`, want: on},
		{name: "settings false in required mode", args: req, env: []string{guardEnv}, settings: `{"tools":{"sandbox":false}}`,
			want: sandboxConfig{Profile: sandboxOff, Explicit: true}},
		{name: "settings docker", settings: `{"tools":{"sandbox":"docker"}}`,
			wantErr: `settings %q: key "tools.sandbox": "docker" is a container sandbox, which acpguard does not run: acpguard confines tools with Landlock; set tools.sandbox to true or pass --sandbox workspace`},
		{name: "settings podman", settings: `{"tools":{"sandbox":"podman"}}`,
			wantErr: `settings %q: key "tools.sandbox": "podman" is a container sandbox, which acpguard does not run: acpguard confines tools with Landlock; set tools.sandbox to true or pass --sandbox workspace`},
		{name: "settings sandbox-exec", settings: `{"tools":{"sandbox":"sandbox-exec"}}`,
			wantErr: `settings %q: key "tools.sandbox": "sandbox-exec" is a container sandbox, which acpguard does not run: acpguard confines tools with Landlock; set tools.sandbox to true or pass --sandbox workspace`},
		{name: "settings string true", settings: `{"tools":{"sandbox":"true"}}`,
			wantErr: `settings %q: key "tools.sandbox": "true" is a container sandbox, which acpguard does not run: acpguard confines tools with Landlock; set tools.sandbox to true or pass --sandbox workspace`},
		{name: "settings number", settings: `{"tools":{"sandbox":1}}`, wantErr: `settings %q: key "tools.sandbox": want a boolean, got number`},
		{name: "settings object", settings: `{"tools":{"sandbox":{"read":[]}}}`, wantErr: `settings %q: key "tools.sandbox": want a boolean, got object`},
		{name: "settings null", settings: `{"tools":{"sandbox":null}}`, wantErr: `settings %q: key "tools.sandbox": want a boolean, got null`},
		{name: "settings sandboxImage", settings: `{"tools":{"sandbox":true,"sandboxImage":"x"}}`, wantErr: `settings %q: key "tools.sandboxImage": Qwen Code's container sandbox is not supported: acpguard confines tools itself (tools.sandbox, DESIGN.md §5), and an ignored image would look like a confinement that is not there`},
		{name: "settings sandbox twice", settings: `{"tools":{"sandbox":true,"sandbox":false}}`, wantErr: `settings %q: duplicate key "tools.sandbox"`},
		// The settings lists.
		{name: "settings lists", settings: fmt.Sprintf(`{"tools":{"sandbox":true,"sandboxRead":["/usr",%q,"/usr/"],"sandboxWrite":[%q],"sandboxNetwork":"none","sandboxUnix":"none"}}`, dir, dir),
			want: with(func(c *sandboxConfig) {
				c.Read, c.Write, c.Network, c.NetworkExplicit, c.Unix = []string{"/usr", dir}, []string{dir}, sandboxNone, true, sandboxNone
			})},
		{name: "settings read empty", settings: `{"tools":{"sandbox":true,"sandboxRead":[]}}`,
			wantErr: `settings %q: key "tools.sandboxRead": an empty list leaves nothing to read or run; list the paths tools need, or leave the key out to read the whole filesystem`},
		{name: "settings read relative", settings: `{"tools":{"sandbox":true,"sandboxRead":["/usr","bin"]}}`,
			wantErr: fmt.Sprintf(`settings %%q: key "tools.sandboxRead[1]": "bin" must be an absolute path, such as %q`, filepath.Join(wd, "bin"))},
		{name: "settings write file", settings: fmt.Sprintf(`{"tools":{"sandbox":true,"sandboxWrite":[%q]}}`, file),
			wantErr: fmt.Sprintf(`settings %%q: key "tools.sandboxWrite[0]": %q is not a directory: a writable path must be an existing directory`, file)},
		{name: "settings write not a list", settings: `{"tools":{"sandbox":true,"sandboxWrite":"/tmp"}}`, wantErr: `settings %q: key "tools.sandboxWrite": want an array, got string`},
		{name: "settings network closed", settings: `{"tools":{"sandbox":true,"sandboxNetwork":"closed"}}`, wantErr: `settings %q: key "tools.sandboxNetwork": "closed": must be "all" or "none"`},
		{name: "settings network empty", settings: `{"tools":{"sandbox":true,"sandboxNetwork":""}}`, wantErr: `settings %q: key "tools.sandboxNetwork": "": must be "all" or "none"`},
		{name: "settings network boolean", settings: `{"tools":{"sandbox":true,"sandboxNetwork":false}}`, wantErr: `settings %q: key "tools.sandboxNetwork": want a string, got boolean`},
		{name: "settings unix open", settings: `{"tools":{"sandbox":true,"sandboxUnix":"open"}}`, wantErr: `settings %q: key "tools.sandboxUnix": "open": must be "all" or "none"`},
		{name: "settings read in off mode", settings: `{"tools":{"sandboxRead":["/usr"]}}`,
			wantErr: `settings %q: key "tools.sandboxRead": confines nothing: the sandbox is off by default with --external-tool-guard-mode off; set tools.sandbox to true or pass --sandbox workspace`},
		{name: "settings unix with settings false", settings: `{"tools":{"sandbox":false,"sandboxUnix":"none"}}`,
			wantErr: `settings %q: key "tools.sandboxUnix": confines nothing with tools.sandbox false; remove it, or set tools.sandbox to true`},
		{name: "settings read in required mode", args: req, env: []string{guardEnv}, settings: `{"tools":{"sandboxRead":["/usr"]}}`,
			want: with(func(c *sandboxConfig) { c.Read = []string{"/usr"} })},
		// Flags win over the operator's settings.
		{name: "flag off wins over settings true and its lists", args: []string{"--sandbox", "off"},
			settings: `{"tools":{"sandbox":true,"sandboxRead":["/usr"],"sandboxNetwork":"none"}}`, want: sandboxConfig{Profile: sandboxOff, Explicit: true}},
		{name: "flag workspace wins over settings false", args: ws, settings: `{"tools":{"sandbox":false,"sandboxRead":["/usr"]}}`,
			want: with(func(c *sandboxConfig) { c.Read = []string{"/usr"} })},
		// Hidden paths add up: the settings', the flags'.
		{name: "hide from settings and flags", args: append(ws, "--sandbox-hide", "/k/flag", "--sandbox-hide", "/k/both/"),
			settings: `{"tools":{"sandboxHide":["/k/set","/k/both"]}}`,
			want:     with(func(c *sandboxConfig) { c.Hide = []string{"/k/set", "/k/both", "/k/flag"} })},
		{name: "hide gives the sandbox explicitly", args: append(req, "--sandbox-hide", "/k"), env: []string{guardEnv},
			want: with(func(c *sandboxConfig) { c.Hide = []string{"/k"} })},
		{name: "settings hide relative", settings: `{"tools":{"sandbox":true,"sandboxHide":["k"]}}`,
			wantErr: fmt.Sprintf(`settings %%q: key "tools.sandboxHide[0]": "k" must be an absolute path, such as %q`, filepath.Join(wd, "k"))},
		{name: "settings hide in off mode", settings: `{"tools":{"sandboxHide":["/k"]}}`,
			wantErr: `settings %q: key "tools.sandboxHide": confines nothing: the sandbox is off by default with --external-tool-guard-mode off; set tools.sandbox to true or pass --sandbox workspace`},
		{name: "hide a read path", args: append(ws, "--sandbox-read", "/usr", "--sandbox-hide", "/usr"),
			wantErr: `--sandbox-read "/usr": is hidden by "/usr"; leave it out of one of the lists`},
		{name: "hide in a write path", args: append(ws, "--sandbox-write", dir, "--sandbox-hide", filepath.Join(dir, "k")),
			wantErr: fmt.Sprintf(`--sandbox-write %q: holds the hidden %q, which tools could then read or replace; move the file out, or leave the directory out`, dir, filepath.Join(dir, "k"))},
		{name: "flag lists replace settings lists", args: append(ws, "--sandbox-read", "/etc", "--sandbox-network", "all", "--sandbox-unix", "all"),
			settings: fmt.Sprintf(`{"tools":{"sandboxRead":["/usr"],"sandboxWrite":[%q],"sandboxNetwork":"none","sandboxUnix":"none"}}`, dir),
			want:     with(func(c *sandboxConfig) { c.Read, c.Write, c.NetworkExplicit = []string{"/etc"}, []string{dir}, true })},
	}
	for _, cmd := range []string{"acp", "serve"} {
		for _, tt := range tests {
			t.Run(cmd+"/"+tt.name, func(t *testing.T) {
				args := tt.args
				path := ""
				if tt.settings != "" {
					path = writeSettings(t, tt.settings)
					args = append(slices.Clone(args), "--settings", path)
				}
				got, err := parseSandboxArgs(cmd, args, tt.env...)
				if tt.wantErr != "" {
					want := strings.ReplaceAll(tt.wantErr, "acpguard CMD", "acpguard "+cmd)
					if strings.Contains(want, "%q") {
						want = fmt.Sprintf(want, path)
					}
					if err == nil || err.Error() != want {
						t.Fatalf("error = %v\nwant    %s", err, want)
					}
					if code := exitCode(err); code != exitUsage {
						t.Errorf("exit code %d, want %d", code, exitUsage)
					}
					return
				}
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !equalSandbox(got, tt.want) {
					t.Errorf("sandbox = %+v\nwant      %+v", got, tt.want)
				}
			})
		}
	}
}

func equalSandbox(a, b sandboxConfig) bool {
	return a.Profile == b.Profile && a.Explicit == b.Explicit && slices.Equal(a.Read, b.Read) && (a.Read == nil) == (b.Read == nil) &&
		slices.Equal(a.Write, b.Write) && a.Network == b.Network && a.NetworkExplicit == b.NetworkExplicit && a.Unix == b.Unix &&
		slices.Equal(a.Hide, b.Hide)
}

// TestSandboxDefaultsMatrix: guard mode x kernel x what the operator asked
// for, as acp and serve start: the sandbox in force, the one warning of a
// default that the kernel cannot give, and exit 1 naming the kernel's
// answer when the operator asked for what the kernel cannot give.
func TestSandboxDefaultsMatrix(t *testing.T) {
	dir := t.TempDir()
	guardEnv := envGuardToken + "=" + testToken
	const enosys = "landlock_create_ruleset version probe: function not implemented"
	const eopnotsupp = "landlock_create_ruleset version probe: operation not supported"
	noLandlock := func(answer string) string {
		return "confine tools with --sandbox workspace: the kernel has no Landlock (" + answer + "); enable it (CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot parameter) or pass --sandbox off"
	}
	oldABI := func(abi int) string {
		return fmt.Sprintf("confine tools with --sandbox-network none: the kernel's Landlock ABI is %d and denying TCP bind and connect needs ABI 4 (Linux 6.7); pass --sandbox-network all or run on a newer kernel", abi)
	}
	modes := map[string]struct {
		args []string
		env  []string
	}{
		"off":      {},
		"required": {args: required("http://127.0.0.1:1"), env: []string{guardEnv}},
		"managed":  {env: managedEnv},
	}
	tests := []struct {
		mode, kernel string
		asked        []string // flags beyond the mode's
		settings     string
		profile      string // in force; "" when exit 1
		abi          int
		network      string
		warn         bool
		err          string
	}{
		// Off mode: off whatever the kernel, and nothing said.
		{mode: "off", kernel: "7", profile: sandboxOff, abi: 7},
		{mode: "off", kernel: "ENOSYS", profile: sandboxOff},
		{mode: "off", kernel: "3", asked: []string{"--sandbox", "workspace"}, profile: sandboxWorkspace, abi: 3, network: sandboxAll},
		{mode: "off", kernel: "ENOSYS", asked: []string{"--sandbox", "workspace"}, err: noLandlock(enosys)},
		{mode: "off", kernel: "ENOSYS", settings: `{"tools":{"sandbox":true}}`, err: noLandlock(enosys)},
		{mode: "off", kernel: "ENOSYS", asked: []string{"--sandbox", "off"}, profile: sandboxOff},
		// Required mode and a managed child: workspace where the kernel
		// can; a default the kernel cannot give starts off with one warning.
		{mode: "required", kernel: "7", profile: sandboxWorkspace, abi: 7, network: sandboxAll},
		{mode: "required", kernel: "1", profile: sandboxWorkspace, abi: 1, network: sandboxAll},
		{mode: "required", kernel: "ENOSYS", profile: sandboxOff, warn: true},
		{mode: "required", kernel: "EOPNOTSUPP", profile: sandboxOff, warn: true},
		{mode: "required", kernel: "0", profile: sandboxOff, warn: true},
		{mode: "required", kernel: "ENOSYS", asked: []string{"--sandbox-write", dir}, profile: sandboxOff, warn: true},
		{mode: "required", kernel: "ENOSYS", asked: []string{"--sandbox", "off"}, profile: sandboxOff},
		{mode: "required", kernel: "ENOSYS", asked: []string{"--sandbox", "workspace"}, err: noLandlock(enosys)},
		{mode: "required", kernel: "EOPNOTSUPP", asked: []string{"--sandbox", "workspace"}, err: noLandlock(eopnotsupp)},
		{mode: "required", kernel: "ENOSYS", settings: `{"tools":{"sandbox":true}}`, err: noLandlock(enosys)},
		{mode: "required", kernel: "ENOSYS", asked: []string{"--sandbox-read", "/usr"}, err: noLandlock(enosys)},
		{mode: "required", kernel: "ENOSYS", asked: []string{"--sandbox-unix", "none"}, err: noLandlock(enosys)},
		{mode: "required", kernel: "ENOSYS", asked: []string{"--sandbox-network", "none"}, err: noLandlock(enosys)},
		{mode: "required", kernel: "3", asked: []string{"--sandbox-network", "none"}, err: oldABI(3)},
		{mode: "required", kernel: "3", settings: `{"tools":{"sandboxNetwork":"none"}}`, err: oldABI(3)},
		{mode: "required", kernel: "4", asked: []string{"--sandbox-network", "none"}, profile: sandboxWorkspace, abi: 4, network: sandboxNone},
		{mode: "required", kernel: "3", asked: []string{"--sandbox-network", "all"}, profile: sandboxWorkspace, abi: 3, network: sandboxAll},
		{mode: "managed", kernel: "7", profile: sandboxWorkspace, abi: 7, network: sandboxAll},
		{mode: "managed", kernel: "ENOSYS", profile: sandboxOff, warn: true},
		{mode: "managed", kernel: "ENOSYS", asked: []string{"--sandbox", "workspace"}, err: noLandlock(enosys)},
	}
	for _, tt := range tests {
		for _, cmd := range []string{"acp", "serve"} {
			if cmd == "serve" && tt.mode == "managed" {
				continue
			}
			name := fmt.Sprintf("%s/%s/%s/%s%s", cmd, tt.mode, tt.kernel, strings.Join(tt.asked, "="), tt.settings)
			t.Run(name, func(t *testing.T) {
				withKernel(t, tt.kernel)
				args := append(slices.Clone(modes[tt.mode].args), tt.asked...)
				if tt.settings != "" {
					args = append(args, "--settings", writeSettings(t, tt.settings))
				}
				cfg, err := parseSandboxArgs(cmd, args, modes[tt.mode].env...)
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				var log bytes.Buffer
				got, err := startSandbox(cfg, slog.New(slog.NewTextHandler(&log, nil)))
				if tt.err != "" {
					if err == nil || err.Error() != tt.err {
						t.Fatalf("start error = %v\nwant          %s", err, tt.err)
					}
					if code := exitCode(err); code != exitRuntime {
						t.Errorf("exit code %d, want %d", code, exitRuntime)
					}
					return
				}
				if err != nil {
					t.Fatalf("start: %v", err)
				}
				want := sandboxReport{Profile: tt.profile, LandlockABI: tt.abi, Network: cmpOr(tt.network, sandboxAll), Unix: sandboxAll, Protect: protectOff, Protected: []string{}}
				if tt.profile == sandboxWorkspace {
					want.Protect = protectMountNamespace
				}
				if r := got.report(); !reflect.DeepEqual(r, want) {
					t.Errorf("in force %+v, want %+v", r, want)
				}
				if got.Config.on() != (tt.profile == sandboxWorkspace) {
					t.Errorf("config %+v does not match the report", got.Config)
				}
				lines := strings.Count(log.String(), "\n")
				switch {
				case tt.warn && (lines != 1 || !strings.Contains(log.String(), "level=WARN msg=\"sandbox off: the kernel has no Landlock")):
					t.Errorf("log = %q, want one warning", log.String())
				case !tt.warn && lines != 0:
					t.Errorf("log = %q, want nothing", log.String())
				}
			})
		}
	}
}

// TestNarrowSandbox: a workspace settings file may take away, never add.
func TestNarrowSandbox(t *testing.T) {
	root := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	usr, usrLib, etc, cache, cacheGo, other := mk("usr"), mk("usr/lib"), mk("etc"), mk("cache"), mk("cache/go"), mk("other")
	// A link inside a readable tree that points outside it must not widen.
	link := filepath.Join(usr, "link")
	if err := os.Symlink(etc, link); err != nil {
		t.Fatal(err)
	}
	op := sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Read: []string{usr}, Write: []string{cache}, Network: sandboxAll, Unix: sandboxAll}
	none := sandboxAccess{set: true, value: sandboxNone}
	all := sandboxAccess{set: true, value: sandboxAll}
	tests := []struct {
		name        string
		op          sandboxConfig
		ws          toolsSettings
		want        sandboxConfig
		wantDropped []string
	}{
		{name: "nothing", op: op, want: op},
		{name: "turn off", op: op, ws: toolsSettings{Sandbox: sandboxSetting{set: true}}, want: op, wantDropped: []string{"tools.sandbox false"}},
		{name: "turn on", op: sandboxConfig{Profile: sandboxOff},
			ws:   toolsSettings{Sandbox: sandboxSetting{set: true, on: true}},
			want: sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Network: sandboxAll, Unix: sandboxAll}},
		{name: "lists without the sandbox", op: sandboxConfig{Profile: sandboxOff},
			ws:   toolsSettings{SandboxRead: []string{usr}, SandboxNetwork: none},
			want: sandboxConfig{Profile: sandboxOff}, wantDropped: []string{"tools.sandboxNetwork", "tools.sandboxRead"}},
		{name: "read narrower", op: op, ws: toolsSettings{SandboxRead: []string{usrLib, etc}},
			want:        sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Read: []string{usrLib}, Write: []string{cache}, Network: sandboxAll, Unix: sandboxAll},
			wantDropped: []string{"tools.sandboxRead " + etc}},
		{name: "read wider keeps the operator's", op: op, ws: toolsSettings{SandboxRead: []string{root}},
			want: op},
		{name: "read through a link", op: op, ws: toolsSettings{SandboxRead: []string{link}},
			want:        sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Read: []string{}, Write: []string{cache}, Network: sandboxAll, Unix: sandboxAll},
			wantDropped: []string{"tools.sandboxRead " + link}},
		{name: "read from the whole filesystem", op: sandboxConfig{Profile: sandboxWorkspace, Network: sandboxAll, Unix: sandboxAll},
			ws:   toolsSettings{SandboxRead: []string{etc}},
			want: sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Read: []string{etc}, Network: sandboxAll, Unix: sandboxAll}},
		{name: "write narrower and wider", op: op, ws: toolsSettings{SandboxWrite: []string{cacheGo, other}},
			want:        sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Read: []string{usr}, Write: []string{cacheGo}, Network: sandboxAll, Unix: sandboxAll},
			wantDropped: []string{"tools.sandboxWrite " + other}},
		{name: "write where the operator gave none", op: sandboxConfig{Profile: sandboxWorkspace, Network: sandboxAll, Unix: sandboxAll},
			ws:          toolsSettings{SandboxWrite: []string{other}},
			want:        sandboxConfig{Profile: sandboxWorkspace, Write: []string{}, Network: sandboxAll, Unix: sandboxAll},
			wantDropped: []string{"tools.sandboxWrite " + other}},
		{name: "deny network and unix", op: op, ws: toolsSettings{SandboxNetwork: none, SandboxUnix: none},
			want: sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Read: []string{usr}, Write: []string{cache}, Network: sandboxNone, NetworkExplicit: true, Unix: sandboxNone}},
		{name: "hide more", op: sandboxConfig{Profile: sandboxWorkspace, Network: sandboxAll, Unix: sandboxAll, Hide: []string{"/k"}},
			ws:   toolsSettings{SandboxHide: []string{"/k", "/j"}},
			want: sandboxConfig{Profile: sandboxWorkspace, Network: sandboxAll, Unix: sandboxAll, Hide: []string{"/k", "/j"}}},
		{name: "allow network and unix back", op: sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Network: sandboxNone, NetworkExplicit: true, Unix: sandboxNone},
			ws:          toolsSettings{SandboxNetwork: all, SandboxUnix: all},
			want:        sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Network: sandboxNone, NetworkExplicit: true, Unix: sandboxNone},
			wantDropped: []string{"tools.sandboxNetwork all", "tools.sandboxUnix all"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := narrowSandbox(tt.op, tt.ws)
			if !equalSandbox(got, tt.want) {
				t.Errorf("narrowed = %+v\nwant       %+v", got, tt.want)
			}
			if !slices.Equal(dropped, tt.wantDropped) {
				t.Errorf("dropped = %q, want %q", dropped, tt.wantDropped)
			}
		})
	}
}

// TestSandboxUsage: both usages list every sandbox flag and settings key.
func TestSandboxUsage(t *testing.T) {
	for cmd, usage := range map[string]string{"acp": acpUsage, "serve": serveUsage} {
		for _, w := range []string{"--sandbox off|workspace", "--sandbox-read PATH", "--sandbox-write DIR", "--sandbox-network all|none", "--sandbox-unix all|none", "tools.sandbox"} {
			if !strings.Contains(usage, w) {
				t.Errorf("%s usage does not list %s", cmd, w)
			}
		}
	}
}

// FuzzSandboxSettings: whatever the tools.sandbox* keys hold, a settings
// file that loads never carries a container sandbox, a relative or unclean
// path, or a network or Unix value other than all or none.
func FuzzSandboxSettings(f *testing.F) {
	for _, s := range []string{`true`, `false`, `"docker"`, `1`, `null`, `{}`, `[]`, `"\u0000"`} {
		f.Add(s, `["/usr"]`, `"none"`)
	}
	f.Add(`true`, `["/", "/usr/", "//etc"]`, `"all"`)
	f.Add(`true`, `["/usr/../etc"]`, `""`)
	f.Fuzz(func(t *testing.T, sandbox, read, network string) {
		for _, doc := range []string{
			`{"tools":{"sandbox":` + sandbox + `,"sandboxRead":` + read + `,"sandboxNetwork":` + network + `}}`,
			`{"tools":{"sandbox":` + sandbox + `,"sandboxWrite":` + read + `,"sandboxUnix":` + network + `}}`,
		} {
			s, err := parseSettings([]byte(doc))
			if err != nil {
				continue
			}
			tl := s.Tools
			if tl.Sandbox.isString {
				t.Fatalf("%s: loaded a container sandbox %q", doc, tl.Sandbox.container)
			}
			for _, p := range append(slices.Clone(tl.SandboxRead), tl.SandboxWrite...) {
				if !filepath.IsAbs(p) || filepath.Clean(p) != p {
					t.Fatalf("%s: loaded the path %q", doc, p)
				}
			}
			for _, a := range []sandboxAccess{tl.SandboxNetwork, tl.SandboxUnix} {
				if a.set && a.value != sandboxAll && a.value != sandboxNone {
					t.Fatalf("%s: loaded %q", doc, a.value)
				}
			}
		}
	})
}
