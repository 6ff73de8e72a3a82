// main.go owns subcommand dispatch, exit codes and `acpguard version`: it
// captures secrets from the environment before anything else runs, then
// hands one run function the arguments. Everything else lives in the
// subcommands' own files.
//
// Error messages, everywhere (DESIGN.md §11): lower case, no final period,
// the operation first, the offending value quoted with %q (never a secret),
// and where the fix is known a hint after a semicolon:
//
//	settings "/srv/a.json": unknown key "tools.aprovalMode"
//	unknown command "sevre"; run "acpguard help"
//
// The host API's JSON errors follow it too; only texts that Qwen Code
// compatibility fixes word for word (its 401 and session_not_found bodies,
// the tool-result texts of the guard) keep their wording.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"
)

// Exit statuses of every subcommand.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	// A confined start's mount stage is this binary too (sandbox_stage.go).
	runSandboxStageIfAsked()
	// The token must be gone from the environment before any goroutine,
	// library or child can read it.
	env := captureEnv()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], &system{env: env, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	var status *exitStatusError
	switch {
	case err == nil, errors.Is(err, errHelp):
	case errors.As(err, &status) && status.err == nil:
		// The command reported it in its own form (run's JSON line).
	default:
		fmt.Fprintf(os.Stderr, "acpguard: error: %v\n", err)
	}
	os.Exit(exitCode(err))
}

// errHelp is returned after a subcommand printed its usage on request.
var errHelp = errors.New("help requested")

func exitCode(err error) int {
	var u *usageError
	var status *exitStatusError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &status):
		return status.code
	case errors.As(err, &u):
		return exitUsage
	default:
		return exitRuntime
	}
}

const mainUsage = `acpguard: a guarded ACP agent runtime and its policy provider

Usage:
  acpguard serve           [flags]   the managed daemon (host HTTP API, private ACP children)
  acpguard acp             [flags]   the guarded ACP agent on stdin/stdout
  acpguard run   [flags] [PROMPT]    the guarded agent in this directory, without an editor
  acpguard provider        [flags]   the reference policy provider
  acpguard provider check  [flags]   test a policy against its cases, without serving
  acpguard demo            [--keep]  the guarded path end to end, on loopback, in a temporary workspace
  acpguard log     [flags] FILE...   read, filter, follow and sum up the decision and audit logs
  acpguard doctor          [flags]   check what acp and serve would start on, each problem with its fix
  acpguard completion bash|zsh|fish  print the shell completion script
  acpguard version                   print the version
  acpguard help                      print this text

Run "acpguard <command> --help" for a command's flags and environment.
`

func run(ctx context.Context, args []string, sys *system) error {
	if len(args) == 0 {
		fmt.Fprint(sys.stderr, mainUsage)
		return usagef(`no command given; run "acpguard help"`)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, sys, rest)
	case "acp":
		return runACP(ctx, sys, rest)
	case "run":
		return runRun(ctx, sys, rest)
	case "provider":
		return runProvider(ctx, sys, rest)
	case "demo":
		return runDemo(ctx, sys, rest)
	case "log":
		opts, err := parseLogArgs(rest, sys, time.Now())
		if err != nil {
			return err
		}
		_, err = runLogRead(ctx, sys, opts)
		return err
	case "doctor":
		opts, err := parseDoctorArgs(rest, sys)
		if err != nil {
			return err
		}
		return runDoctor(ctx, sys, opts)
	case "completion":
		return runCompletion(sys, rest)
	case "version", "--version":
		return runVersion(sys, rest)
	case "help", "--help", "-h", "-help":
		fmt.Fprint(sys.stdout, mainUsage)
		return nil
	default:
		fmt.Fprint(sys.stderr, mainUsage)
		return usagef(`unknown command %q; run "acpguard help"`, cmd)
	}
}

// runACP parses acp's options (config.go) and runs the agent (acp.go).
func runACP(ctx context.Context, sys *system, args []string) error {
	// A parent that dies closes our stdout: the write that finds it closed
	// ends the connection, and the shutdown runs (lifeline.go).
	catchBrokenPipe()
	opts, err := parseACPArgs(args, sys)
	if errors.Is(err, errHelp) {
		return err
	}
	if err != nil {
		// The editor that started acp is told why in its initialize.
		return refuseInitialize(sys, err, false)
	}
	// A managed child's guard is its parent's, which warns once.
	if sys.env.privateGuard == "" {
		warnUnguarded(sys.stderr, "acp", opts.Guard, opts.GuardModeGiven, opts.LogJSON)
	}
	return runAgent(ctx, sys, opts)
}

// runRun parses run's options (config_run.go) and runs the prompt
// (run.go), after the off-mode warning.
func runRun(ctx context.Context, sys *system, args []string) error {
	opts, err := parseRunArgs(args, sys)
	if err != nil {
		return err
	}
	warnUnguarded(sys.stderr, "run", opts.ACP.Guard, opts.ACP.GuardModeGiven, opts.ACP.LogJSON)
	return runPrompt(ctx, sys, opts)
}

// runServe parses serve's options (config.go) and runs the daemon
// (serve.go).
func runServe(ctx context.Context, sys *system, args []string) error {
	opts, err := parseServeArgs(args, sys)
	if err != nil {
		return err
	}
	warnUnguarded(sys.stderr, "serve", opts.Guard, opts.GuardModeGiven, opts.LogJSON)
	return runDaemon(ctx, sys, opts)
}

func runVersion(sys *system, args []string) error {
	if len(args) > 0 {
		if args[0] == "--help" || args[0] == "-h" {
			fmt.Fprint(sys.stdout, "Usage: acpguard version\n\nPrints the version, the VCS revision, whether the tree was modified, and the Go version.\n")
			return errHelp
		}
		return usagef(`version takes no arguments, got %q; run "acpguard version"`, args[0])
	}
	rev, modified := "unknown", "unknown"
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	fmt.Fprintf(sys.stdout, "acpguard %s\nrevision: %s\nmodified: %s\ngo: %s\n", version, rev, modified, goVersion)
	return nil
}
