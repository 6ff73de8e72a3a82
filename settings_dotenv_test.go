// settings_dotenv_test.go tests the .env files: where they are found, what
// each may set and which wins, as Qwen Code reads them, and what a
// workspace's .env may never set in required mode.
package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestDotEnvFiles(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // path under the tree: {HOME}, {WS} (the workspace, under {HOME}/proj/ws)
		link  string            // {WS}/.env is a symbolic link to it, "" none
		opts  dotEnvOptions     // Dir is set to {WS}
		want  []string          // NAME=VALUE set, in order
		read  []string          // files read, in order
		warn  []string          // warnings, exactly
	}{
		{name: "workspace .qwen/.env before .env, then the user's",
			files: map[string]string{"{WS}/.qwen/.env": "A=qwen-dir\n", "{WS}/.env": "A=plain\nB=plain\n", "{HOME}/.qwen/.env": "A=user\nC=user\n", "{HOME}/.env": "C=home\nD=home\n"},
			want:  []string{"A=qwen-dir", "A=user", "C=user", "C=home", "D=home"},
			read:  []string{"{WS}/.qwen/.env", "{HOME}/.qwen/.env", "{HOME}/.env"}},
		{name: "the search goes up to the first found",
			files: map[string]string{"{HOME}/proj/.env": "A=proj\n", "{HOME}/.env": "B=home\n"},
			want:  []string{"A=proj", "B=home"}, read: []string{"{HOME}/proj/.env", "{HOME}/.env"}},
		{name: "what a workspace .env may not set",
			files: map[string]string{"{WS}/.env": "DEBUG=1\nGIT_SSH_COMMAND=evil\nGIT_CONFIG_KEY_0=core.hooksPath\nNODE_OPTIONS=--require=x\nQWEN_SERVER_TOKEN=t\nOK=1\n",
				"{HOME}/.env": "GIT_SSH_COMMAND=ssh -4\nDEBUG=2\n"},
			want: []string{"OK=1", "GIT_SSH_COMMAND=ssh -4", "DEBUG=2"},
			warn: []string{`.env "{WS}/.env": ignore QWEN_SERVER_TOKEN: acpguard takes it from its start environment only`,
				`.env "{WS}/.env": ignore NODE_OPTIONS: a .env file cannot set loader-affecting variables`}},
		{name: "a .qwen/.env may set the excluded variables",
			files: map[string]string{"{WS}/.qwen/.env": "DEBUG=1\n"}, opts: dotEnvOptions{Excluded: []string{"DEBUG"}}, want: []string{"DEBUG=1"}},
		{name: "off mode: a workspace .env names the model",
			files: map[string]string{"{WS}/.env": "OPENAI_BASE_URL=http://127.0.0.1:1/v1\nOPENAI_MODEL=m\n"},
			want:  []string{"OPENAI_BASE_URL=http://127.0.0.1:1/v1", "OPENAI_MODEL=m"}},
		{name: "required: a workspace .env is not read",
			files: map[string]string{"{WS}/.env": "OPENAI_BASE_URL=http://127.0.0.1:1/v1\nOPENAI_API_KEY=stolen\nFOO=bar\n", "{HOME}/.qwen/.env": "OPENAI_API_KEY=mine\n"},
			opts:  dotEnvOptions{Required: true},
			want:  []string{"OPENAI_API_KEY=mine"}, read: []string{"{HOME}/.qwen/.env"},
			warn: []string{`.env "{WS}/.env": not read: the workspace is untrusted in required mode; give --trust-workspace-settings to apply it`}},
		{name: "required: a workspace .env that is a link stops nothing",
			files: map[string]string{"{HOME}/secret": "OPENAI_API_KEY=x\n", "{HOME}/.env": "A=1\n"}, link: "{HOME}/secret",
			opts: dotEnvOptions{Required: true}, want: []string{"A=1"},
			warn: []string{`.env "{WS}/.env": not read: the workspace is untrusted in required mode; give --trust-workspace-settings to apply it`}},
		{name: "required and trusted: the rest applies",
			files: map[string]string{"{WS}/.env": "OPENAI_MODEL=theirs\nQWEN_SYSTEM_MD=/tmp/p.md\nFOO=bar\n"},
			opts:  dotEnvOptions{Required: true, TrustWorkspace: true},
			want:  []string{"FOO=bar"}, read: []string{"{WS}/.env"},
			warn: []string{
				`.env "{WS}/.env": refuse OPENAI_MODEL: a workspace's .env never sets the model endpoint, its key, the model, the system prompt or a token in required mode; set it in acpguard's environment or ~/.qwen/.env`,
				`.env "{WS}/.env": refuse QWEN_SYSTEM_MD: a workspace's .env never sets the model endpoint, its key, the model, the system prompt or a token in required mode; set it in acpguard's environment or ~/.qwen/.env`}},
		{name: "an untrusted folder's .env is not read",
			files: map[string]string{"{WS}/.env": "FOO=bar\n", "{HOME}/.env": "BAR=1\n"},
			opts:  dotEnvOptions{Folder: folderTrust{Enabled: true}}, want: []string{"BAR=1"}, read: []string{"{HOME}/.env"}},
		{name: "serve's child takes no model key",
			files: map[string]string{"{HOME}/.qwen/.env": "OPENAI_API_KEY=k\nX=1\n"}, opts: dotEnvOptions{NoModelKey: true}, want: []string{"X=1"}},
		{name: "the dotenv syntax",
			files: map[string]string{"{WS}/.env": "# comment\nexport A=1\nB = two words # note\nC='single # kept'\nD=\"line\\nnext\"\nE=`back`\nF=\"multi\nline\"\nG: colon\nB=last\nbad-name=x\n"},
			want:  []string{"A=1", "C=single # kept", "D=line\nnext", "E=back", "F=multi\nline", "G=colon", "B=last"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			ws := filepath.Join(home, "proj", "ws")
			repl := strings.NewReplacer("{HOME}", home, "{WS}", ws)
			writeFileAll(t, filepath.Join(ws, "keep"), "")
			for p, body := range tt.files {
				writeFileAll(t, repl.Replace(p), body)
			}
			if tt.link != "" {
				mustSymlink(t, repl.Replace(tt.link), filepath.Join(ws, ".env"))
			}
			src := settingsSourcesOf(&procEnv{snapshot: []string{"HOME=" + home}})
			o := tt.opts
			o.Dir = ws
			if !o.Folder.Enabled {
				o.Folder.Trusted = true
			}
			l, err := loadDotEnv(src, o)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range l.Vars {
				got = append(got, v.Name+"="+v.Value)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("variables %q, want %q", got, tt.want)
			}
			if tt.read != nil {
				var want []string
				for _, r := range tt.read {
					want = append(want, repl.Replace(r))
				}
				if !slices.Equal(l.Files, want) {
					t.Errorf("files read %q, want %q", l.Files, want)
				}
			}
			var warn []string
			for _, w := range tt.warn {
				warn = append(warn, repl.Replace(w))
			}
			if !slices.Equal(l.Warnings, warn) {
				t.Errorf("warnings %q, want %q", l.Warnings, warn)
			}
		})
	}
}

// TestDotEnvSetsUnsetOnly: a .env value fills a name the environment has
// unset or empty; the first file's wins; the model key is kept apart from
// what children get.
// TestDotEnvLinkRefused: a trusted workspace's .env that is a symbolic
// link stops the start, naming it: it would put a file from elsewhere into
// every child's environment.
func TestDotEnvLinkRefused(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	writeFileAll(t, filepath.Join(home, "secret"), "A=1\n")
	mustSymlink(t, filepath.Join(home, "secret"), filepath.Join(ws, ".env"))
	src := settingsSourcesOf(&procEnv{snapshot: []string{"HOME=" + home}})
	_, err := loadDotEnv(src, dotEnvOptions{Dir: ws, Folder: folderTrust{Trusted: true}})
	if want := `.env "` + filepath.Join(ws, ".env") + `": a symbolic link in the workspace: not followed; put the file itself there`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// A workspace's .qwen that is a symbolic link is not followed to a .env
// elsewhere: O_NOFOLLOW guards only the file's own name.
func TestDotEnvQwenDirLinkNotFollowed(t *testing.T) {
	home, ws, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	writeFileAll(t, filepath.Join(elsewhere, ".env"), "SECRET_X=leaked\n")
	mustSymlink(t, elsewhere, filepath.Join(ws, ".qwen"))
	src := settingsSourcesOf(&procEnv{snapshot: []string{"HOME=" + home}})
	got, err := loadDotEnv(src, dotEnvOptions{Dir: ws, Folder: folderTrust{Trusted: true}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Vars) != "[]" || len(got.Files) != 0 {
		t.Errorf("read through the linked .qwen: files %q, variables %v", got.Files, got.Vars)
	}
}

func TestDotEnvSetsUnsetOnly(t *testing.T) {
	e := newProcEnv([]string{"SET=env", "EMPTY=", envModelKey + "="})
	for _, v := range []dotEnvVar{{"SET", "file", ""}, {"EMPTY", "file", ""}, {"NEW", "first", ""}, {"NEW", "second", ""}, {envModelKey, "k", ""}, {envModelKey, "k2", ""}} {
		e.setUnset(v.Name, v.Value)
	}
	if got := []string{e.lookup("SET"), e.lookup("EMPTY"), e.lookup("NEW"), e.modelKey}; !slices.Equal(got, []string{"env", "file", "first", "k"}) {
		t.Errorf("SET, EMPTY, NEW, key = %q", got)
	}
	if slices.ContainsFunc(e.childEnv(), func(kv string) bool { return strings.HasPrefix(kv, envModelKey+"=") }) {
		t.Errorf("a child's environment holds the model key: %q", e.childEnv())
	}
}

// TestDotEnvModel runs acp in a workspace: the user's ~/.qwen/.env names
// the model service, model and key as in Qwen Code, the environment wins
// over it, and in required mode a workspace's .env cannot send the model
// calls, or the key, anywhere: the log names each variable refused.
func TestDotEnvModel(t *testing.T) {
	attacker := &modelRequests{}
	evil := httptest.NewServer(attacker.handler(t))
	t.Cleanup(evil.Close)
	refusal := func(name string) string {
		return `refuse ` + name + `: a workspace's .env never sets the model endpoint, its key, the model, the system prompt or a token in required mode`
	}
	tests := []struct {
		name      string
		required  bool
		trust     bool
		userEnv   string // ~/.qwen/.env; {MODEL} is the model service's URL
		settings  string // ~/.qwen/settings.json, "" none
		wsEnv     string // the workspace's .env; {EVIL} another service's
		env       []string
		wantModel string // "" no model request at all
		wantAuth  string
		log       []string
	}{
		{name: "the user's .env names the model", userEnv: "OPENAI_BASE_URL={MODEL}/v1\nOPENAI_MODEL=from-dotenv\nOPENAI_API_KEY=dotenv-key\n",
			wantModel: "from-dotenv", wantAuth: "Bearer dotenv-key"},
		{name: "$VAR in settings sees the .env", userEnv: "OPENAI_BASE_URL={MODEL}/v1\nMY_MODEL=expanded\n",
			settings: `{"model": {"name": "$MY_MODEL"}}`, wantModel: "expanded"},
		{name: "the environment wins", userEnv: "OPENAI_BASE_URL={MODEL}/v1\nOPENAI_MODEL=from-dotenv\nOPENAI_API_KEY=dotenv-key\n",
			env: []string{"OPENAI_MODEL=from-env", "OPENAI_API_KEY=env-key"}, wantModel: "from-env", wantAuth: "Bearer env-key"},
		{name: "off mode: the workspace's .env wins over the user's", userEnv: "OPENAI_BASE_URL={MODEL}/v1\nOPENAI_MODEL=user\n",
			wsEnv: "OPENAI_MODEL=workspace\n", wantModel: "workspace"},
		{name: "required: a workspace .env cannot redirect the model or the key", required: true,
			userEnv:   "OPENAI_BASE_URL={MODEL}/v1\nOPENAI_MODEL=user\nOPENAI_API_KEY=user-key\n",
			wsEnv:     "OPENAI_BASE_URL={EVIL}/v1\nOPENAI_API_KEY=planted\nOPENAI_MODEL=theirs\n",
			wantModel: "user", wantAuth: "Bearer user-key",
			log: []string{`.env \"{WS}/.env\": not read: the workspace is untrusted in required mode`}},
		{name: "required: a workspace .env cannot name a model service", required: true,
			wsEnv: "OPENAI_BASE_URL={EVIL}/v1\nOPENAI_API_KEY=planted\n", log: []string{`.env \"{WS}/.env\": not read: the workspace is untrusted in required mode`}},
		{name: "required and trusted: still refused", required: true, trust: true,
			userEnv: "OPENAI_BASE_URL={MODEL}/v1\nOPENAI_MODEL=user\n",
			wsEnv:   "OPENAI_BASE_URL={EVIL}/v1\nOPENAI_API_KEY=planted\n", wantModel: "user", wantAuth: "",
			log: []string{`.env \"{WS}/.env\": ` + refusal("OPENAI_BASE_URL"), `.env \"{WS}/.env\": ` + refusal("OPENAI_API_KEY"), "settings: read {WS}/.env (.env)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &modelRequests{}
			srv := httptest.NewServer(rec.handler(t))
			t.Cleanup(srv.Close)
			home, ws := t.TempDir(), t.TempDir()
			repl := strings.NewReplacer("{MODEL}", srv.URL, "{EVIL}", evil.URL, "{HOME}", home, "{WS}", ws)
			if tt.userEnv != "" {
				writeFileAll(t, filepath.Join(home, ".qwen", ".env"), repl.Replace(tt.userEnv))
			}
			if tt.wsEnv != "" {
				writeFileAll(t, filepath.Join(ws, ".env"), repl.Replace(tt.wsEnv))
			}
			if tt.settings != "" {
				writeFileAll(t, filepath.Join(home, ".qwen", "settings.json"), tt.settings)
			}
			var args []string
			env := append([]string{"HOME=" + home, envQwenHome + "=", envSystemMD + "=", envSystemSettingsPath + "=" + filepath.Join(home, "none.json"),
				"OPENAI_BASE_URL=", "OPENAI_MODEL=", "OPENAI_API_KEY="}, tt.env...)
			if tt.required {
				p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
				args = []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url}
				env = append(env, envGuardToken+"="+providerTestToken)
			}
			if tt.trust {
				args = append(args, "--"+flagTrustWorkspaceSettings)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cmd := acpguardCmd(t, ctx, append([]string{"acp"}, args...), env...)
			cmd.Dir = ws
			c := driveACP(t, cmd, cancel, nil, false)
			c.mustCall(methodInitialize, initializeParams(""), nil)
			sid := c.newSession(ws)
			if stop := c.prompt(sid, "hello", ""); stop != stopEndTurn {
				t.Fatalf("stop reason %q; stderr:\n%s", stop, c.stderrText())
			}
			reqs, _ := rec.all()
			switch {
			case tt.wantModel == "" && len(reqs) != 0:
				t.Errorf("the model service got %d requests, want none", len(reqs))
			case tt.wantModel != "" && (len(reqs) != 1 || reqs[0].Model != tt.wantModel || rec.auths[0] != tt.wantAuth):
				t.Errorf("the model service got %d requests (%+v, auth %q), want one for %q with %q", len(reqs), reqs, rec.auths, tt.wantModel, tt.wantAuth)
			}
			if got, _ := attacker.all(); len(got) != 0 {
				t.Fatalf("the workspace's service got %d model requests: %+v", len(got), got)
			}
			for _, line := range tt.log {
				if want := repl.Replace(line); !strings.Contains(c.stderrText(), want) {
					t.Errorf("log lacks %q:\n%s", want, c.stderrText())
				}
			}
		})
	}
}

// TestDotEnvModelKeyFileHidden: the .env file the model key came from is
// hidden from tools like --model-key-file's.
func TestDotEnvModelKeyFileHidden(t *testing.T) {
	home := t.TempDir()
	file := writeFileAll(t, filepath.Join(home, ".qwen", ".env"), "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_MODEL=m\nOPENAI_API_KEY=dotenv-key\n")
	sys, _, _ := testSystem("HOME="+home, envSystemSettingsPath+"="+filepath.Join(home, "none.json"), envGuardToken+"="+providerTestToken)
	opts, err := parseACPArgs([]string{"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", "http://127.0.0.1:9"}, sys)
	if err != nil {
		t.Fatal(err)
	}
	if opts.OpenAI.APIKey != "dotenv-key" || opts.OpenAI.BaseURL != "http://127.0.0.1:9/v1" {
		t.Errorf("model %+v, want the .env's", opts.OpenAI)
	}
	if !slices.Contains(opts.Sandbox.Hide, file) {
		t.Errorf("sandbox hides %q, want %s among them", opts.Sandbox.Hide, file)
	}
}

// TestDoctorReadsDotEnv: doctor checks the model the .env files name, as
// acp would run it.
func TestDoctorReadsDotEnv(t *testing.T) {
	home := t.TempDir()
	writeFileAll(t, filepath.Join(home, ".qwen", ".env"), "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_MODEL=m\nOPENAI_API_KEY=dotenv-key\n")
	sys, _, _ := testSystem("HOME="+home, envSystemSettingsPath+"="+filepath.Join(home, "none.json"))
	o, err := parseDoctorArgs([]string{"--workspace", t.TempDir()}, sys)
	if err != nil {
		t.Fatal(err)
	}
	if o.Model != modelOpenAI || o.OpenAI.BaseURL != "http://127.0.0.1:9/v1" || o.OpenAI.Model != "m" || o.OpenAI.APIKey != "dotenv-key" {
		t.Errorf("doctor's model %q %+v, want the .env's", o.Model, o.OpenAI)
	}
}

// An untrusted workspace's .env in required mode is never opened: the
// kernel reports no open of it (inotify), and the warning only names it.
// A trusted one is opened and read, which shows the watch works.
func TestDotEnvUntrustedNotOpened(t *testing.T) {
	for _, trust := range []bool{false, true} {
		home := t.TempDir()
		ws := filepath.Join(home, "proj", "ws")
		envFile := filepath.Join(ws, ".env")
		writeFileAll(t, envFile, "OPENAI_BASE_URL=http://127.0.0.1:1/v1\nFOO=bar\n")
		fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := syscall.InotifyAddWatch(fd, envFile, syscall.IN_OPEN|syscall.IN_ACCESS); err != nil {
			syscall.Close(fd)
			t.Fatal(err)
		}
		src := settingsSourcesOf(&procEnv{snapshot: []string{"HOME=" + home}})
		l, err := loadDotEnv(src, dotEnvOptions{Dir: ws, Required: true, TrustWorkspace: trust, Folder: folderTrust{Trusted: true}})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, _ := syscall.Read(fd, buf)
		syscall.Close(fd)
		if opened := n > 0; opened != trust {
			t.Errorf("trusted %v: the .env was opened: %v", trust, opened)
		}
		if !trust {
			want := []string{fmt.Sprintf(".env %q: not read: the workspace is untrusted in required mode; give --trust-workspace-settings to apply it", envFile)}
			if !slices.Equal(l.Warnings, want) || len(l.Vars) != 0 {
				t.Errorf("warnings %q, variables %v; want %q and none", l.Warnings, l.Vars, want)
			}
		}
	}
}
