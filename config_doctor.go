// config_doctor.go extends the configuration group with "acpguard doctor":
// every flag of acp and serve, so that either command line checks as it
// is, and the environment, resolved into doctorOptions by the functions
// acp and serve start with. Each part resolves on its own, so that one bad
// part is reported and the others are still checked (doctor.go).
package main

import (
	"os"
)

const doctorUsage = `Usage: acpguard doctor [flags]

Checks what acp and serve would start on, with the same flags and
environment, and prints one line per check, "ok", "warn" or "FAIL", with
what it found and, where something is wrong, the fix:
  settings      each settings file read, each key dropped or ignored and why
  provider      in required mode, one handshake with the token (never printed)
  model         with OPENAI_BASE_URL, GET {base}/models answers and lists the model
  sandbox       the sandbox flags and keys, the kernel's Landlock ABI, and
                whether user namespaces let the mount stage protect paths
  hooks, MCP    each PreToolUse hook command and MCP server command exists
                and is executable: looked at, never run
  state dir     owned by this user, no other user may write it
  ports         serve's --hostname and --port, the provider's port
The settings files are those of the first --workspace, else of the
current directory, as acp and serve read them at start.

Exit status: 0 when no required check failed (warnings included); 1 when
one did: a provider that does not answer in required mode, a model URL that
does not answer, a missing or non-executable hook or MCP server command, an
unsafe state directory, a flag, variable or settings file acp or serve
would refuse; 2 on a usage error.

Flags:
  --json
        print one JSON object instead of lines:
        {"checks":[{"name","status":"ok|warn|fail","detail","fix"}],"ok":bool}
  -h, --help
        print this text.

Every flag of acp and serve is taken, so either command line checks as it
is (see "acpguard acp --help" and "acpguard serve --help"). These choose
what is checked; the others are checked for their values only:
  --external-tool-guard-mode off|required, --external-tool-guard-endpoint URL,
  --external-tool-guard-timeout-ms N, --external-tool-guard-token-file FILE
        the provider of the handshake, which runs once, bounded by the
        timeout (--external-tool-guard-startup-wait-ms is not waited).
  --settings FILE, --no-user-settings, --trust-workspace-settings, --workspace DIR
        the settings files, and the hooks and MCP servers they set.
  --model scripted|openai|parent, --model-key-file FILE
        the model (OPENAI_BASE_URL, OPENAI_MODEL, OPENAI_API_KEY).
  --sandbox off|workspace, --sandbox-read PATH, --sandbox-write DIR,
  --sandbox-hide PATH, --sandbox-protect PATH, --sandbox-network all|none,
  --sandbox-unix all|none, --sandbox-private FILE, --sandbox-temp DIR
        the sandbox, checked against the kernel.
  --state-dir DIR|off
        acp's state directory (default $XDG_STATE_HOME/acpguard/sessions).
  --hostname HOST, --port N
        serve's address (default 127.0.0.1:4170).
  --token T, --token-file FILE, --allow-tokenless-loopback, --require-auth,
  --no-web, --open,
  --decision-log FILE, --decision-log-arguments,
  --max-pending-prompts-per-session N, --max-sessions N,
  --max-children N, --max-subscribers-per-session N, --event-ring-size N,
  --initialize-timeout-ms N, --prompt-deadline-ms N,
  --permission-response-timeout-ms N, --session-idle-timeout-ms N,
  --max-event-memory BYTES, --system-prompt-file FILE,
  --allow-slash-command NAME, --disabled-slash-commands NAME[,NAME...],
  --log-format text|json, --log-level debug|info|warn|error,
  --external-tool-guard-startup-wait-ms N
        checked for their values only.

Environment: that of acp and serve (QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN,
OPENAI_BASE_URL, OPENAI_MODEL, OPENAI_API_KEY, QWEN_SERVER_TOKEN, HOME,
QWEN_HOME, XDG_STATE_HOME, QWEN_CODE_SYSTEM_SETTINGS_PATH, ...); no token
or key is ever printed.
`

// parseDoctorArgs parses doctor's flags, acp's and serve's, and resolves
// them with the environment. Only a malformed command line is an error
// (exit 2); a value acp or serve would refuse is kept in the options for
// its check.
func parseDoctorArgs(args []string, sys *system) (doctorOptions, error) {
	fs := newFlagSet("doctor")
	jsonOut := fs.Bool("json", false, "")
	shared := addSharedFlags(fs)
	// acp's own flags; --permission-response-timeout-ms is among serve's
	// limits, with the same range.
	modelName := onceFlag(fs, "model", "")
	stateDir := onceFlag(fs, flagStateDir, "")
	// serve's own flags.
	sf := addServeFlags(fs)
	hostname, port, token, tokenFile := sf.hostname, sf.port, sf.token, sf.tokenFile
	tokenless, requireAuth, maxPending, limits := sf.tokenless, sf.requireAuth, sf.maxPending, sf.limits
	if err := parseFlags(fs, "doctor", doctorUsage, args, sys); err != nil {
		return doctorOptions{}, err
	}
	env := envOf(sys)
	o := doctorOptions{JSON: *jsonOut, GuardGiven: shared.guard.mode.count > 0}
	o.Guard, o.GuardErr = shared.guard.resolve(env)
	required := shared.guard.mode.value == guardModeRequired
	o.secrets = append(o.secrets, o.Guard.Token, env.guardToken, env.serverToken, env.modelKey, token.value)

	// The workspace of the settings files: serve's first, else acp's, the
	// current directory.
	dirs, err := parseWorkspaces(*sf.workspaces)
	if err != nil {
		// A bad --workspace leaves the current directory's files to check.
		o.flagErr(err)
		wd, _ := os.Getwd()
		dirs = []string{wd}
	}
	ws := dirs[0]
	o.Workspace = ws
	o.settingsSrc = settingsSourcesOf(env)
	o.settingsOpts = settingsLoadOptions{Workspace: ws, NoUser: *shared.noUser, TrustWorkspace: *shared.trustWorkspace, Required: required}
	o.SettingsFile, o.SettingsLoad, o.SettingsErr = parseSettingsFile(shared.settings.value, o.settingsSrc, o.settingsOpts)
	if o.SettingsLoad != nil && !*shared.noUser {
		// The .env files as acp reads them from the workspace: the model
		// check sees what they set.
		sh := sharedOptions{load: o.SettingsLoad, src: o.settingsSrc, required: required}
		if o.SettingsLoad.DotEnv, err = shared.applyDotEnv(env, sh, ws, false); err != nil {
			o.SettingsErr = err
		}
	}
	st := o.settings()

	choice, err := shared.sandbox.check()
	switch {
	case err != nil:
		o.SandboxErr = err
	case o.SettingsLoad != nil:
		if o.Sandbox, o.SandboxErr = choice.resolve(st, o.SettingsLoad.originOf("tools", o.SettingsFile), required); o.SandboxErr == nil {
			o.SandboxErr = o.Sandbox.checkHideWays()
		}
	}

	// The model as acp resolves it; serve's is the same without --model.
	am := acpOptions{Model: modelName.value, Settings: st}
	o.ModelErr = resolveACPModel(&am, shared.modelKeyFile, env)
	o.Model, o.OpenAI = am.Model, am.OpenAI
	o.secrets = append(o.secrets, am.OpenAI.APIKey)

	o.StateDir, o.StateDirGiven, o.StateDirErr = parseStateDir(stateDir, env, false)

	so := serveOptions{Guard: o.Guard}
	if so.Hostname, o.ServeAddrErr = parseHostname(hostname.value); o.ServeAddrErr == nil {
		if so.Port, err = parsePort(port.value); err != nil {
			o.ServeAddrErr = usagef("--port %q: %v", port.value, err)
		}
	}
	o.ServeHost, o.ServePort = so.Hostname.host, so.Port

	// The flags that choose no check, checked as acp and serve check them.
	if _, _, err := parseLogFlags(shared.logFormat.value, shared.logLevel.value); err != nil {
		o.flagErr(err)
	}
	if _, err := limits.resolve(); err != nil {
		o.flagErr(err)
	}
	if err := resolveServePrompts(&so, maxPending, shared.slash, shared.disabledSlash); err != nil {
		o.flagErr(err)
	}
	if _, err := resolveSystemPrompt(shared.systemPromptFile.value, env, st); err != nil {
		o.flagErr(err)
	}
	if o.ServeAddrErr == nil {
		if err := resolveServeAuth(&so, token, tokenFile, *tokenless, *requireAuth, env, hostname.value); err != nil {
			o.flagErr(err)
		}
		o.secrets = append(o.secrets, so.Token)
	}
	return o, nil
}

// flagErr keeps err among the flag errors of o.
func (o *doctorOptions) flagErr(err error) { o.FlagErrs = append(o.FlagErrs, err) }
