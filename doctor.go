// doctor.go owns "acpguard doctor": the checks of what acp and serve start
// on, each made by the code they start with (the provider handshake, the
// model client, the Landlock and mount stage probes, the settings load, the
// state directory's rule, the socket tables), and the report: one line per
// check with its fix, or one JSON object. The hook and MCP server commands
// it checks are looked at, never run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The statuses of a check, as --json names them.
const (
	doctorOK   = "ok"
	doctorWarn = "warn" // works, or may, but not as the operator may expect
	doctorFail = "fail" // acp or serve would refuse to start, or a call would fail: exit 1
)

// The model check: a server that answers at all lists its models within
// seconds, and doctor must not hang on one that never does; a list of
// models is a few kilobytes, and more is not read; the names shown of a
// list that lacks the configured one.
const (
	doctorModelTimeout   = 5 * time.Second
	doctorModelsMaxBytes = 1 << 20
	doctorModelsShown    = 8
	openAIModelsPath     = "models" // under the base URL, as chat/completions
)

// accessExecute is X_OK for access(2): may this user run the file.
const accessExecute = 1

// doctorRedacted stands for a token or key that a check's text held.
const doctorRedacted = "[redacted]"

// doctorOptions are doctor's flags and environment as acp and serve would
// resolve them (config_doctor.go); each part's error is kept for its check.
type doctorOptions struct {
	JSON bool

	Guard      guardConfig
	GuardGiven bool // --external-tool-guard-mode on the command line
	GuardErr   error

	// Workspace is the directory whose settings file is read, and where
	// relative hook and MCP server commands are found: the first
	// --workspace, else the current directory.
	Workspace    string
	SettingsFile string        // --settings, absolute; "" none
	SettingsLoad *settingsLoad // nil when SettingsErr
	SettingsErr  error
	settingsSrc  settingsSources
	settingsOpts settingsLoadOptions

	Sandbox    sandboxConfig
	SandboxErr error

	Model    string // modelScripted, modelOpenAI or modelParent
	OpenAI   openAIConfig
	ModelErr error

	StateDir      string // "" none
	StateDirGiven bool
	StateDirErr   error

	ServeHost    string
	ServePort    int
	ServeAddrErr error

	// FlagErrs are the errors of the flags that choose no check.
	FlagErrs []error

	// secrets are every token and key doctor was given: no check's text
	// holds one.
	secrets []string
}

// settings are the merged settings, or the defaults when they did not load.
func (o *doctorOptions) settings() *settings {
	if o.SettingsLoad != nil {
		return o.SettingsLoad.Settings
	}
	st, err := parseSettings([]byte("{}"))
	if err != nil {
		panic(fmt.Sprintf("the default settings do not parse: %v", err))
	}
	return st
}

// doctorCheck is one line of the report.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"` // what was found
	Fix    string `json:"fix"`    // "" when nothing is to fix
}

// doctorReport is every check, in the order of the README's sections.
type doctorReport struct {
	Checks []doctorCheck `json:"checks"`
	OK     bool          `json:"ok"` // no check failed
}

func (r *doctorReport) add(name, status, detail, fix string) {
	r.Checks = append(r.Checks, doctorCheck{Name: name, Status: status, Detail: detail, Fix: fix})
}

// addErr adds err as a check: by the error message rule (main.go), what
// comes before its first "; " is what was found, the rest the fix.
func (r *doctorReport) addErr(name, status string, err error) {
	detail, fix, _ := strings.Cut(err.Error(), "; ")
	r.add(name, status, detail, fix)
}

// count returns how many checks have status.
func (r *doctorReport) count(status string) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == status {
			n++
		}
	}
	return n
}

// redact replaces each secret in every check's text.
func (r *doctorReport) redact(secrets []string) {
	for i := range r.Checks {
		c := &r.Checks[i]
		for _, s := range secrets {
			if s = strings.TrimSpace(s); s != "" {
				c.Detail = strings.ReplaceAll(c.Detail, s, doctorRedacted)
				c.Fix = strings.ReplaceAll(c.Fix, s, doctorRedacted)
			}
		}
	}
}

// runDoctor parses doctor's flags (config_doctor.go), runs every check and
// prints the report; an error when a check failed makes the exit status 1.
func runDoctor(ctx context.Context, sys *system, opts doctorOptions) error {
	r := doctorRun(ctx, opts)
	r.redact(opts.secrets)
	var err error
	if opts.JSON {
		err = writeDoctorJSON(sys.stdout, r)
	} else {
		err = writeDoctorText(sys.stdout, r)
	}
	if err != nil {
		return fmt.Errorf("doctor: write the report: %w", err)
	}
	if n := r.count(doctorFail); n > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed; each names its fix", n, len(r.Checks))
	}
	return nil
}

// doctorRun makes every check, in the order the README sets them up.
func doctorRun(ctx context.Context, o doctorOptions) *doctorReport {
	r := &doctorReport{Checks: []doctorCheck{}}
	doctorFlags(r, o)
	doctorSettings(r, o)
	doctorProvider(ctx, r, o)
	doctorModel(ctx, r, o)
	doctorSandbox(r, o)
	doctorHooks(r, o)
	doctorMCPServers(r, o)
	doctorStateDir(r, o)
	doctorPorts(r, o)
	r.OK = r.count(doctorFail) == 0
	return r
}

func writeDoctorJSON(w io.Writer, r *doctorReport) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// doctorLabels are the statuses as the text report shows them.
var doctorLabels = map[string]string{doctorOK: "ok", doctorWarn: "warn", doctorFail: "FAIL"}

// writeDoctorText writes one line per check, "STATUS  name: detail; fix",
// control characters made visible, then the counts.
func writeDoctorText(w io.Writer, r *doctorReport) error {
	var b strings.Builder
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %s: %s", doctorLabels[c.Status], visibleText(c.Name), visibleText(c.Detail))
		if c.Fix != "" {
			fmt.Fprintf(&b, "; %s", visibleText(c.Fix))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "\n%d checks: %d ok, %d warn, %d FAIL\n", len(r.Checks), r.count(doctorOK), r.count(doctorWarn), r.count(doctorFail))
	_, err := io.WriteString(w, b.String())
	return err
}

// doctorFlags reports the values of the flags that choose no check.
func doctorFlags(r *doctorReport, o doctorOptions) {
	for _, err := range o.FlagErrs {
		r.addErr("flags", doctorFail, err)
	}
	if len(o.FlagErrs) == 0 {
		r.add("flags", doctorOK, "the values acp and serve check at start are valid", "")
	}
}

// doctorSettings reports the settings files read and what of them was
// dropped or ignored, with why.
func doctorSettings(r *doctorReport, o doctorOptions) {
	const name = "settings"
	if o.SettingsErr != nil {
		r.addErr(name, doctorFail, o.SettingsErr)
		return
	}
	l := o.SettingsLoad
	if len(l.Files) == 0 {
		var looked []string
		for _, ly := range settingsLayers(o.settingsSrc, o.settingsOpts) {
			if ly.path != "" {
				looked = append(looked, ly.path)
			}
		}
		r.add(name, doctorOK, "no settings file exists, so the defaults apply (looked for "+strings.Join(looked, ", ")+")", "")
	}
	for _, f := range l.Files {
		r.add(name, doctorOK, fmt.Sprintf("read %s (%s)", f.Path, f.Scope), "")
	}
	st := l.Settings
	for _, w := range slices.Concat(l.Warnings, st.Warnings) {
		r.addErr(name, doctorWarn, errors.New(w))
	}
	if len(st.Ignored) > 0 {
		r.add(name, doctorOK, "Qwen Code keys acpguard does not act on, ignored: "+strings.Join(st.Ignored, ", "), "")
	}
	for _, s := range st.SkippedMCP {
		r.add(name, doctorOK, fmt.Sprintf("MCP server %q is not started: mcp.allowed or mcp.excluded leaves it out", s), "")
	}
}

// doctorProvider runs the handshake once in required mode: the provider
// answers at the endpoint, with this token.
func doctorProvider(ctx context.Context, r *doctorReport, o doctorOptions) {
	const name = "provider"
	switch {
	case o.GuardErr != nil:
		r.addErr(name, doctorFail, o.GuardErr)
	case !o.Guard.required() && o.GuardGiven:
		r.add(name, doctorOK, fmt.Sprintf("off (--%s=%s): no provider is asked", flagGuardMode, guardModeOff), "")
	case !o.Guard.required():
		r.add(name, doctorWarn, "off: no provider is asked, so every tool call the approval mode allows runs without a policy decision",
			fmt.Sprintf("start a provider and pass --%s %s (pass --%s=%s to accept this)", flagGuardMode, guardModeRequired, flagGuardMode, guardModeOff))
	default:
		c := newProviderClient(o.Guard)
		defer c.close()
		if err := c.handshake(ctx); err != nil {
			r.addErr(name, doctorFail, err)
			return
		}
		r.add(name, doctorOK, fmt.Sprintf("%s answered the handshake with this token (provider %s)", c.origin, c.identity()), "")
	}
}

// doctorModel asks an OpenAI-compatible model server for its models: the
// route answers where the chat completions route does, without a prompt.
func doctorModel(ctx context.Context, r *doctorReport, o doctorOptions) {
	const name = "model"
	switch {
	case o.ModelErr != nil:
		r.addErr(name, doctorFail, o.ModelErr)
		return
	case o.Model == modelScripted:
		r.add(name, doctorOK, fmt.Sprintf("the built-in scripted model (%s is not set, or --model %s)", envModelBaseURL, modelScripted), "")
		return
	case o.Model == modelParent:
		r.add(name, doctorOK, "parent: serve makes the model calls", "")
		return
	}
	m, err := newOpenAIModel(o.OpenAI)
	if err != nil {
		r.addErr(name, doctorFail, err)
		return
	}
	base, err := url.Parse(o.OpenAI.BaseURL)
	if err != nil {
		r.addErr(name, doctorFail, err)
		return
	}
	list := base.JoinPath(openAIModelsPath).String()
	ctx, cancel := context.WithTimeout(ctx, doctorModelTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, list, nil)
	if err != nil {
		r.addErr(name, doctorFail, err)
		return
	}
	if o.OpenAI.APIKey != "" {
		req.Header.Set("Authorization", openAIAuthScheme+o.OpenAI.APIKey)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		r.add(name, doctorFail, fmt.Sprintf("GET %s: %v", list, err),
			fmt.Sprintf("start the model server, or set %s to where it answers", envModelBaseURL))
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, doctorModelsMaxBytes))
	found := fmt.Sprintf("GET %s: status %s", list, resp.Status)
	switch {
	case resp.StatusCode == http.StatusOK:
		status, detail, fix := doctorModelListed(found, body, o.OpenAI.Model)
		r.add(name, status, detail, fix)
	case resp.StatusCode == http.StatusNotFound && m.notFoundHint != "":
		r.add(name, doctorFail, found, strings.TrimPrefix(m.notFoundHint, "; "))
	case resp.StatusCode == http.StatusNotFound:
		r.add(name, doctorWarn, found+": the server lists no models; chat completions go to "+m.endpoint, "")
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		r.add(name, doctorFail, found+": body "+quoteSnippet(body, o.OpenAI.APIKey),
			fmt.Sprintf("set %s, or --%s, to a key the server accepts", envModelKey, flagModelKeyFile))
	default:
		r.add(name, doctorWarn, found+": body "+quoteSnippet(body, o.OpenAI.APIKey), "")
	}
}

// doctorModelListed reads a model list, {"data":[{"id":...}]}: the model
// configured should be among them. The list only informs, so a server
// that lists in another shape, or adds keys, is read leniently.
func doctorModelListed(found string, body []byte, model string) (status, detail, fix string) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		return doctorOK, found, ""
	}
	var ids []string
	for _, d := range list.Data {
		if d.ID == model {
			return doctorOK, fmt.Sprintf("%s, lists %q", found, model), ""
		}
		ids = append(ids, strconv.Quote(d.ID))
	}
	shown := strings.Join(ids[:min(len(ids), doctorModelsShown)], ", ")
	if len(ids) > doctorModelsShown {
		shown += ", ..."
	}
	return doctorWarn, fmt.Sprintf("%s, but %q is not among the %d models it lists (%s)", found, model, len(ids), shown),
		fmt.Sprintf("set %s (or model.name) to one of them", envModelName)
}

// doctorSandbox reports the sandbox acp and serve would confine tools
// with: the flags and keys, the kernel's Landlock, and the mount stage
// that needs user namespaces.
func doctorSandbox(r *doctorReport, o doctorOptions) {
	cfg := o.Sandbox
	switch {
	case o.SandboxErr != nil:
		r.addErr("sandbox", doctorFail, o.SandboxErr)
		cfg = sandboxConfig{Profile: sandboxOff}
	case o.SettingsLoad == nil:
		// The settings check failed: the keys that choose it are unknown.
		cfg = sandboxConfig{Profile: sandboxOff}
	}
	abi, probeErr := probeLandlock()
	inForce, err := startSandbox(cfg, slog.New(slog.DiscardHandler))
	if o.SandboxErr == nil && o.SettingsLoad != nil && err == nil {
		rep := inForce.report()
		r.add("sandbox", doctorOK, fmt.Sprintf("profile %s, network %s, unix %s, protect %s", rep.Profile, rep.Network, rep.Unix, rep.Protect), "")
	}
	switch {
	case err != nil:
		r.addErr("landlock", doctorFail, err)
	case probeErr != nil && cfg.on():
		r.add("landlock", doctorWarn, fmt.Sprintf("none (%v): the sandbox turns off at start, and tools, hooks and MCP servers run unconfined", probeErr),
			fmt.Sprintf("enable Landlock (CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot parameter), or pass --%s %s to accept this", flagSandbox, sandboxOff))
	case probeErr != nil:
		r.add("landlock", doctorOK, fmt.Sprintf("none (%v); the sandbox is off", probeErr), "")
	case abi < sandboxNetworkABI:
		r.add("landlock", doctorOK, fmt.Sprintf("ABI %d (--%s %s needs ABI %d, Linux 6.7)", abi, flagSandboxNetwork, sandboxNone, sandboxNetworkABI), "")
	default:
		r.add("landlock", doctorOK, fmt.Sprintf("ABI %d", abi), "")
	}
	const name = "user namespaces"
	switch err := mountStageWorks(); {
	case err == nil:
		r.add(name, doctorOK, "the mount stage works: protected paths are mounted read-only for tools", "")
	case inForce.Config.on():
		r.add(name, doctorWarn, fmt.Sprintf("the mount stage fails (%v): a session with a protected path in reach is refused", err),
			"enable unprivileged user namespaces (sysctl user.max_user_namespaces, or an AppArmor restriction such as kernel.apparmor_restrict_unprivileged_userns), or start sessions in a directory that holds no protected path")
	default:
		r.add(name, doctorOK, fmt.Sprintf("the mount stage fails (%v); only the sandbox needs it, and it is off", err), "")
	}
}

// doctorHooks looks at each PreToolUse command hook's command, as bash
// would find it: every simple command's program exists and is executable.
func doctorHooks(r *doctorReport, o doctorOptions) {
	if o.SettingsLoad == nil {
		return
	}
	st := o.SettingsLoad.Settings
	file := o.SettingsLoad.originOf("hooks", o.SettingsFile)
	n := 0
	for _, m := range st.Hooks.PreToolUse {
		n += len(m.Hooks)
	}
	switch {
	case n == 0:
		r.add("hooks", doctorOK, "no PreToolUse hook", "")
		return
	case st.DisableAllHooks:
		r.add("hooks", doctorOK, "disableAllHooks is true: no hook runs", "")
		return
	}
	if _, err := exec.LookPath("bash"); err != nil {
		r.add("hooks", doctorFail, "bash is not found in PATH, and every hook runs as `bash -c COMMAND`", "install bash")
	}
	for i, m := range st.Hooks.PreToolUse {
		for j, h := range m.Hooks {
			name := "hook " + h.label()
			key := fmt.Sprintf("hooks.PreToolUse[%d].hooks[%d].command", i, j)
			if h.Type == hookTypeHTTP {
				r.add(name, doctorOK, "an http hook: not checked (its URL is reached when it runs)", "")
				continue
			}
			cmds, complex, err := parseShell(h.Command)
			if err != nil || complex {
				why := ""
				for _, c := range cmds {
					if c.Complex && why == "" {
						why = " (" + c.Why + ")"
					}
				}
				r.add(name, doctorWarn, "not checked: not a simple command"+why, "")
				continue
			}
			status, detail, fix := doctorShellCommands(cmds, o.Workspace, key, file)
			r.add(name, status, detail, fix)
		}
	}
}

// doctorShellCommands looks at the program of each simple command of a
// hook, and of what each runs through a wrapper (timeout 5 ./check): the
// first that is not ok is the answer.
func doctorShellCommands(cmds []shellCommand, dir, key, file string) (status, detail, fix string) {
	var found []string
	for _, c := range cmds {
		for _, cc := range append([]shellCommand{c}, expandWrappers(c)...) {
			if len(cc.Argv) == 0 {
				continue
			}
			status, detail, fix := doctorCommand(cc.Argv, dynOf(cc), true, dir, key, file)
			if status != doctorOK {
				return status, detail, fix
			}
			if !slices.Contains(found, detail) {
				found = append(found, detail)
			}
		}
	}
	return doctorOK, strings.Join(found, ", "), ""
}

// doctorMCPServers looks at each MCP server's command, as the agent would
// start it: it exists and is executable, in the directory it starts in.
func doctorMCPServers(r *doctorReport, o doctorOptions) {
	if o.SettingsLoad == nil {
		return
	}
	st := o.SettingsLoad.Settings
	if len(st.MCPServers) == 0 {
		r.add("MCP servers", doctorOK, "none", "")
		return
	}
	configs, err := mcpServersFromSettings(st.MCPServers)
	if err != nil {
		r.addErr("MCP servers", doctorFail, err)
		return
	}
	file := o.SettingsLoad.originOf("mcpServers", o.SettingsFile)
	for _, c := range configs {
		name := fmt.Sprintf("MCP server %q", c.Name)
		if c.remote() {
			// Not contacted: doctor sends nothing to the operator's servers.
			var unset []string
			for _, v := range mcpHeaderSecrets([]mcpServerConfig{c}) {
				if _, ok := os.LookupEnv(v); !ok {
					unset = append(unset, v)
				}
			}
			if len(unset) > 0 {
				r.add(name, doctorFail, fmt.Sprintf("its headers name %q, not set", unset), "set them in acpguard's environment, or change mcpServers."+c.Name+".headers in "+doctorWhere(file))
				continue
			}
			r.add(name, doctorOK, fmt.Sprintf("%s server at %s (not contacted)", c.Transport, c.URL), "")
			continue
		}
		dir := o.Workspace
		if c.Cwd != "" {
			dir = c.Cwd
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(o.Workspace, c.Cwd)
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				r.add(name, doctorFail, fmt.Sprintf("cwd %q is not a directory", dir),
					fmt.Sprintf("create it, or change mcpServers.%s.cwd in %s", c.Name, doctorWhere(file)))
				continue
			}
		}
		argv := append([]string{c.Command}, c.Args...)
		status, detail, fix := doctorCommand(argv, make([]bool, len(argv)), false, dir, "mcpServers."+c.Name+".command", file)
		r.add(name, status, detail, fix)
	}
}

// bashBuiltins are the names bash runs itself, never looked up in PATH.
var bashBuiltins = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`: . [ alias bg bind break builtin caller cd command compgen complete
		compopt continue declare dirs disown echo enable eval exec exit export false fc fg getopts hash
		help history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly
		return set shift shopt source suspend test times trap true type typeset ulimit umask unalias
		unset wait`) {
		m[n] = true
	}
	return m
}()

// scriptInterpreters run the script their first argument names; doctor
// checks that script exists when the argument is a path.
var scriptInterpreters = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "python": true,
	"python3": true, "node": true, "perl": true, "ruby": true}

// doctorCommand looks at the program argv runs, in dir, as bash (shell)
// or exec would find it, and at the script an interpreter is given as a
// path: key names the settings key that gave it, in file.
func doctorCommand(argv []string, dyn []bool, shell bool, dir, key, file string) (status, detail, fix string) {
	prog := argv[0]
	switch {
	case dyn[0]:
		return doctorWarn, fmt.Sprintf("%q: not checked: known only when bash runs it", prog), ""
	case shell && bashBuiltins[prog]:
		return doctorOK, fmt.Sprintf("%q is a bash builtin", prog), ""
	}
	moveFix := fmt.Sprintf("install it, or change %s in %s", key, doctorWhere(file))
	if !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			return doctorFail, fmt.Sprintf("%q is not found in PATH", prog), moveFix
		}
		prog = p
	} else if !filepath.IsAbs(prog) {
		prog = filepath.Join(dir, prog)
	}
	fi, err := os.Stat(prog)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return doctorFail, fmt.Sprintf("%q does not exist", prog), moveFix
	case err != nil:
		return doctorFail, fmt.Sprintf("%q: %v", prog, err), moveFix
	case !fi.Mode().IsRegular():
		return doctorFail, fmt.Sprintf("%q is not a regular file", prog), moveFix
	case syscall.Access(prog, accessExecute) != nil:
		return doctorFail, fmt.Sprintf("%q is not executable (mode %04o)", prog, fi.Mode().Perm()), fmt.Sprintf("chmod +x %s", prog)
	}
	detail = fmt.Sprintf("%q is executable", prog)
	if scriptInterpreters[path.Base(prog)] && len(argv) > 1 && !dyn[1] && strings.Contains(argv[1], "/") && !strings.HasPrefix(argv[1], "-") {
		script := argv[1]
		if !filepath.IsAbs(script) {
			script = filepath.Join(dir, script)
		}
		if fi, err := os.Stat(script); err != nil || !fi.Mode().IsRegular() {
			return doctorFail, fmt.Sprintf("%s, and its script %q is not a file", detail, script), moveFix
		}
		detail += fmt.Sprintf(" with the script %q", script)
	}
	return doctorOK, detail, ""
}

// doctorWhere names the settings file of a fix, or the settings when no
// file is known.
func doctorWhere(file string) string {
	if file == "" {
		return "the settings"
	}
	return strconv.Quote(file)
}

// doctorStateDir checks acp's state directory as acp opens it, without
// making it: one named by --state-dir that acp refuses stops acp; the
// default one only costs session/load.
func doctorStateDir(r *doctorReport, o doctorOptions) {
	const name = "state directory"
	dir := o.StateDir
	switch {
	case o.StateDirErr != nil:
		r.addErr(name, doctorFail, o.StateDirErr)
		return
	case dir == "" && o.StateDirGiven:
		r.add(name, doctorOK, fmt.Sprintf("--%s %s: sessions are not saved, and session/load is not offered", flagStateDir, stateDirOff), "")
		return
	case dir == "":
		r.add(name, doctorWarn, fmt.Sprintf("none: neither %s nor a user cache directory is known, so sessions are not saved", envStateHome),
			fmt.Sprintf("pass --%s DIR, or --%s %s", flagStateDir, flagStateDir, stateDirOff))
		return
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		r.add(name, doctorOK, fmt.Sprintf("%q does not exist yet: acp makes it, mode 0700, at start", dir), "")
		return
	}
	mode, err := checkStateDir(dir)
	switch {
	case err != nil && o.StateDirGiven:
		r.addErr(name, doctorFail, err)
	case err != nil:
		detail, fix, _ := strings.Cut(err.Error(), "; ")
		r.add(name, doctorWarn, detail+" (acp then saves no session)", fix)
	case mode&0o077 != 0:
		r.add(name, doctorWarn, fmt.Sprintf("%q: mode %04o lets other users read the saved conversations", dir, mode), fmt.Sprintf("chmod 700 %s", dir))
	default:
		r.add(name, doctorOK, fmt.Sprintf("%q: this user's, mode %04o", dir, mode), "")
	}
}

// doctorPorts reports serve's address free, and who listens on the
// provider's port: the endpoint's in required mode, else the address the
// README starts the provider on.
func doctorPorts(r *doctorReport, o doctorOptions) {
	switch {
	case o.ServeAddrErr != nil:
		r.addErr("serve port", doctorFail, o.ServeAddrErr)
	case o.ServePort == 0:
		r.add("serve port", doctorOK, "--port 0: serve picks a free port at start", "")
	default:
		doctorPortFree(r, "serve port", net.JoinHostPort(o.ServeHost, strconv.Itoa(o.ServePort)), uint16(o.ServePort), "--port")
	}
	switch {
	case o.GuardErr != nil:
	case o.Guard.required():
		u := o.Guard.Endpoint
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return
		}
		if who := portHolder(uint16(n)); who != "" {
			r.add("provider port", doctorOK, fmt.Sprintf("%s listens on port %d", who, n), "")
		}
	default:
		doctorPortFree(r, "provider port", defaultProviderListen, providerDefaultPort(), "the provider's --listen and the same --"+flagGuardEndpoint)
	}
}

// providerDefaultPort is the port of the provider's default --listen.
func providerDefaultPort() uint16 {
	a, rule := loopbackListen(defaultProviderListen)
	if rule != "" {
		panic("the default provider address is not loopback: " + rule)
	}
	return a.Port()
}

// doctorPortFree binds addr for an instant, as the listener would, and
// names who holds it when it is in use.
func doctorPortFree(r *doctorReport, name, addr string, port uint16, flag string) {
	ln, err := net.Listen("tcp", addr)
	switch {
	case err == nil:
		ln.Close()
		r.add(name, doctorOK, addr+" is free", "")
	case errors.Is(err, syscall.EADDRINUSE):
		who := portHolder(port)
		if who == "" {
			who = "another socket"
		}
		r.add(name, doctorWarn, fmt.Sprintf("%s is in use by %s", addr, who), "stop it, or choose another port with "+flag)
	default:
		r.add(name, doctorWarn, fmt.Sprintf("%s: %v", addr, err), "choose another address with "+flag)
	}
}
