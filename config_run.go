// config_run.go extends the configuration group with "acpguard run": its
// flags, which may come before or after the prompt words, and its usage,
// into runOptions. The agent's options are acp's, built by the same
// function from the same shared flags.
package main

import (
	"flag"
	"slices"
	"strings"
	"time"
)

const runUsage = `Usage: acpguard run [flags] [PROMPT...]

Runs the guarded agent in the current directory on one prompt and prints
its answer, as Qwen Code's headless mode ("qwen PROMPT") does: configured
as "acpguard acp" is (the same settings files, guard flags and environment,
sandbox and model environment), started in this process and reached only as
its ACP client, so every tool call passes the same execution boundary. The
prompt is the words, or --prompt; standard input's text, when it is not a
terminal, comes before it. Nobody is asked anything: a call that needs
approval is declined, with the text
  acpguard requires permission to use "TOOL", but that permission was declined.
and the model goes on. Flags may come before or after the prompt words;
"--" ends them.

On a terminal (stdin and stdout) without -o, run is interactive: after the
prompt words, if any, it reads one prompt per line, shows each call with
its arguments, an edit's diff and how it was decided, and asks on the
terminal about a call that needs approval (answer its number, or y allow
once, a always, n reject; nothing is chosen by default). Ctrl-C cancels
the running turn, a second Ctrl-C exits (130), Ctrl-D at the prompt line
exits (0). Control characters from tools and the model are shown as
escapes; NO_COLOR turns colour off. The budgets bound the whole run.

Flags:
  -p, --prompt TEXT
        the prompt, instead of the words.
  -o, --output-format text|json|stream-json
        text (default): the final assistant text. json: one JSON array of
        the messages at the end: a system init message, one assistant
        message per model turn (its text and tool_use items), one user
        message per tool result (tool_result, is_error), and a result
        with the final text, usage, permission_denials (the calls the
        permission layers or the guard did not let run) and stats.
        stream-json: the same messages as JSON lines as they happen (the
        result without stats), with stream_event lines.
  --include-partial-messages
        stream-json only: the text as it arrives, as stream_event deltas.
  --approval-mode plan|default|auto-edit|yolo
        the session's approval mode (default: the settings'
        tools.approvalMode, else default): plan runs read-only tools only,
        default declines edits and shell commands, auto-edit declines shell
        commands, yolo runs every call the rules and the guard allow.
  -y, --yolo
        --approval-mode yolo.
  -m, --model NAME
        the model of the OpenAI-compatible service (wins over OPENAI_MODEL
        and model.name); without OPENAI_BASE_URL the built-in scripted
        model runs, where each line "call TOOL {json}" proposes one call.
  --max-session-turns N
        model turns the run may make, 1 through 1000 (default: the
        settings' model.maxSessionTurns, 50 unless set, which also bounds
        N); one more ends the run with exit status 53.
  --max-tool-calls N
        tool calls the model may propose, 0 or more (default: no budget);
        a turn that proposes one more ends the run with exit status 55
        before any of its calls runs.
  --max-wall-time D
        the run's wall time: seconds (90) or a duration (30s, 5m, 1h);
        past it the running call is cancelled and the run ends with exit
        status 55.
  --session-id ID
        the new session's id (1 to 128 of A-Z a-z 0-9 - _ . :), saved
        under it.
  -r, --resume ID
        go on with the saved session ID of the current directory.
  -c, --continue
        go on with the session of the current directory saved last (a new
        session when there is none).
  --state-dir DIR|off
        where sessions are saved, as for acp (default
        $XDG_STATE_HOME/acpguard/sessions).
` + guardFlagsUsage + `  --model-key-file FILE
        read the model's API key from FILE once at start, instead of
        OPENAI_API_KEY (both is an error).
  --settings FILE, --no-user-settings, --trust-workspace-settings,
  --disabled-slash-commands NAME[,NAME...], --system-prompt-file FILE
        as for acp (see "acpguard acp --help").
` + sandboxFlagsUsage + `  --log-format text|json
        the format of the log on stderr (default text).
  --log-level debug|info|warn|error
        the least severe log level written (default warn).
  -h, --help
        print this text.

Output: stdout carries only the output above; notices, the log and, in text
format, one line per call that did not run go to stderr.

Exit status:
  0   the prompt ran to its end, also when calls were declined or denied
  1   a runtime error: the provider not answering in required mode, the
      model service failing, the agent not starting
  2   a usage error: a bad flag, no prompt, a bad settings file
  53  the turn limit (--max-session-turns, model.maxSessionTurns)
  55  a budget: --max-tool-calls or --max-wall-time
  130 interrupted (SIGINT, SIGTERM)
An aborted run (53, 55) prints nothing on stdout in text and json format
(stream-json keeps the lines already written) and one JSON line on stderr:
  {"error":{"type":"FatalBudgetExceededError","message":"Run aborted:
  tool-call budget of 0 exceeded (--max-tool-calls); observed 1.","code":55}}
(type FatalTurnLimitedError, code 53, for the turn limit).

Environment: as for acp (see "acpguard acp --help").
`

// maxRunToolCalls bounds --max-tool-calls: past every model turn's calls.
const maxRunToolCalls = maxMaxTurns * 1000

// runFlags are run's flags, not yet validated: acp's shared ones and its
// own, a short name beside some (Qwen Code's).
type runFlags struct {
	shared                                         *sharedFlags
	stateDir, model, prompt, format, approval      *onceValue
	maxTurns, maxCalls, maxWall, sessionID, resume *onceValue
	partial, yolo, cont                            *bool
}

// addRunFlags registers run's flags on fs.
func addRunFlags(fs *flag.FlagSet) *runFlags {
	f := &runFlags{shared: addSharedFlags(fs)}
	// A person reads run's stderr: warnings, not every decision.
	f.shared.logLevel.value = "warn"
	f.stateDir = onceFlag(fs, flagStateDir, "")
	f.model = onceFlag(fs, "model", "")
	fs.Var(f.model, "m", "")
	f.prompt = onceFlag(fs, "prompt", "")
	fs.Var(f.prompt, "p", "")
	f.format = onceFlag(fs, "output-format", runFormatText)
	fs.Var(f.format, "o", "")
	f.partial = fs.Bool("include-partial-messages", false, "")
	f.approval = onceFlag(fs, "approval-mode", "")
	f.yolo = fs.Bool("yolo", false, "")
	fs.BoolVar(f.yolo, "y", false, "")
	f.maxTurns = onceFlag(fs, flagMaxSessionTurns, "")
	f.maxCalls = onceFlag(fs, flagMaxToolCalls, "")
	f.maxWall = onceFlag(fs, flagMaxWallTime, "")
	f.sessionID = onceFlag(fs, "session-id", "")
	f.resume = onceFlag(fs, "resume", "")
	fs.Var(f.resume, "r", "")
	f.cont = fs.Bool("continue", false, "")
	fs.BoolVar(f.cont, "c", false, "")
	return f
}

// parseRunArgs parses "acpguard run"'s arguments; flags and prompt words mix.
func parseRunArgs(args []string, sys *system) (runOptions, error) {
	fs := newFlagSet("run")
	f := addRunFlags(fs)
	flags, words := splitFlagsAndArgs(fs, args)
	if err := parseFlags(fs, "run", runUsage, flags, sys); err != nil {
		return runOptions{}, err
	}
	opts := runOptions{Format: f.format.value, FormatGiven: f.format.count > 0, Partial: *f.partial,
		SessionID: f.sessionID.value, Resume: f.resume.value, Continue: *f.cont}
	switch {
	case f.prompt.count > 0 && len(words) > 0:
		return runOptions{}, usagef("--prompt %q and the prompt words %q: both given; give the prompt one way", f.prompt.value, strings.Join(words, " "))
	case f.prompt.count > 0:
		opts.Prompt = f.prompt.value
	default:
		opts.Prompt = strings.Join(words, " ")
	}
	formats := []string{runFormatText, runFormatJSON, runFormatStreamJSON}
	if !slices.Contains(formats, opts.Format) {
		return runOptions{}, usagef("--output-format %q: want %s", opts.Format, strings.Join(formats, ", "))
	}
	if opts.Partial && opts.Format != runFormatStreamJSON {
		return runOptions{}, usagef("--include-partial-messages: only with --output-format %s", runFormatStreamJSON)
	}
	var err error
	if opts.ApprovalMode, err = parseRunApprovalMode(f.approval, *f.yolo); err != nil {
		return runOptions{}, err
	}
	if opts.Limits, err = parseRunLimits(f.maxTurns, f.maxCalls, f.maxWall); err != nil {
		return runOptions{}, err
	}
	if err := checkRunSession(opts, f.sessionID, f.resume); err != nil {
		return runOptions{}, err
	}
	env := envOf(sys)
	sd, sdGiven, err := parseStateDir(f.stateDir, env, false)
	if err != nil {
		return runOptions{}, err
	}
	// -m names the model; the service is the environment's, as for acp.
	acp := acpOptions{StateDir: sd, StateDirGiven: sdGiven}
	acp.OpenAI.Model = f.model.value
	if opts.ACP, err = resolveACPOptions(f.shared, env, acp); err != nil {
		return runOptions{}, err
	}
	if f.model.count > 0 && opts.ACP.Model != modelOpenAI {
		return runOptions{}, usagef("--model %q: names a model of the OpenAI-compatible service; set %s (without it the scripted model runs)", f.model.value, envModelBaseURL)
	}
	return opts, nil
}

// parseRunApprovalMode reads --approval-mode and -y: "" keeps the
// settings' mode.
func parseRunApprovalMode(mode *onceValue, yolo bool) (string, error) {
	if yolo {
		if mode.count > 0 && mode.value != modeYolo {
			return "", usagef("--yolo and --approval-mode %q: both given; give one", mode.value)
		}
		return modeYolo, nil
	}
	if mode.count == 0 {
		return "", nil
	}
	var known []string
	for _, m := range approvalModes {
		known = append(known, m.id)
	}
	if !slices.Contains(known, mode.value) {
		return "", usagef("--approval-mode %q: want %s", mode.value, strings.Join(known, ", "))
	}
	return mode.value, nil
}

// parseRunLimits reads the budget flags.
func parseRunLimits(turns, calls, wall *onceValue) (runLimits, error) {
	l := runLimits{MaxToolCalls: -1}
	if turns.count > 0 {
		n, ok := parseDigits[int](turns.value)
		if !ok || n < 1 || n > maxMaxTurns {
			return l, usagef("--%s %q: want an integer from 1 through %d", flagMaxSessionTurns, turns.value, maxMaxTurns)
		}
		l.MaxTurns = n
	}
	if calls.count > 0 {
		n, ok := parseDigits[int](calls.value)
		if !ok || n > maxRunToolCalls {
			return l, usagef("--%s %q: want an integer from 0 through %d", flagMaxToolCalls, calls.value, maxRunToolCalls)
		}
		l.MaxToolCalls = n
	}
	if wall.count > 0 {
		d, err := time.ParseDuration(wall.value)
		if n, ok := parseDigits[int](wall.value); ok {
			d, err = time.Duration(min(n, int(maxRunWallTime/time.Second)+1))*time.Second, nil
		}
		if err != nil || d <= 0 || d > maxRunWallTime {
			return l, usagef("--%s %q: want seconds (90) or a duration (30s, 5m, 1h), more than 0 and at most %s", flagMaxWallTime, wall.value, maxRunWallTime)
		}
		l.MaxWallTime = d
	}
	return l, nil
}

// maxRunWallTime bounds --max-wall-time: a week, past any run's length.
const maxRunWallTime = 7 * 24 * time.Hour

// checkRunSession checks the session flags: at most one, each id valid.
func checkRunSession(opts runOptions, sessionID, resume *onceValue) error {
	given := 0
	for _, g := range []bool{sessionID.count > 0, resume.count > 0, opts.Continue} {
		if g {
			given++
		}
	}
	if given > 1 {
		return usagef("--session-id, --resume and --continue: give at most one")
	}
	for _, f := range []struct {
		name string
		v    *onceValue
	}{{"session-id", sessionID}, {"resume", resume}} {
		if f.v.count > 0 && !validSessionID(f.v.value) {
			return usagef("--%s %q: not a session id (1 to %d of A-Z a-z 0-9 - _ . :)", f.name, f.v.value, maxSessionIDLen)
		}
	}
	return nil
}
