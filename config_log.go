// config_log.go extends the configuration group with "acpguard log": its
// flags, which may come before or after the files, into logOptions.
package main

import (
	"flag"
	"slices"
	"strings"
	"time"
)

const logUsage = `Usage: acpguard log [flags] FILE...

Reads serve's decision log (serve --decision-log FILE) and the provider's
audit log (provider --audit FILE), either or both, several files each (for
example rotated ones) in the order given, and prints one line per decision:
time, outcome, tool, session, prompt and tool call ids, the provider's
request id, the policy rule that decided (from the audit log) and the reason
shown. A decision found in both logs, by its request id, is printed once. A
line that is not a record is reported on stderr and skipped. Control
characters in what the logs hold are printed as escapes.

Flags may come before or after the files.
  --follow
        after the files' end, print what is appended to them until
        interrupted (a file truncated by rotation is read again from its start).
  --summary
        instead of the records: per tool and per session the allowed, denied
        and failed decisions, and the most frequent deny reasons.
  --session ID
        only the decisions of this session.
  --tool NAME
        only the decisions about this canonical tool name.
  --outcome OUTCOME
        only this outcome: allowed, denied, failed (every failure category),
        or one failure category (timeout, transport, identity, ...).
  --since TIME
        only the decisions at or after TIME: RFC 3339 (2026-01-02T15:04:05Z)
        or a duration back from now (90m, 24h).

Exit status: 0, also when lines were skipped; 1 when a file cannot be read;
2 on a usage error.
`

// parseLogArgs parses "acpguard log"'s arguments; flags and files mix.
func parseLogArgs(args []string, sys *system, now time.Time) (logOptions, error) {
	fs := newFlagSet("log")
	follow := fs.Bool("follow", false, "")
	summary := fs.Bool("summary", false, "")
	session := onceFlag(fs, "session", "")
	tool := onceFlag(fs, "tool", "")
	outcome := onceFlag(fs, "outcome", "")
	since := onceFlag(fs, "since", "")
	flags, files := splitFlagsAndArgs(fs, args)
	if err := parseFlags(fs, "log", logUsage, flags, sys); err != nil {
		return logOptions{}, err
	}
	opts := logOptions{Files: files, Follow: *follow, Summary: *summary, logFilter: logFilter{Session: session.value, Tool: tool.value, Outcome: outcome.value}}
	if len(files) == 0 {
		return opts, usagef(`no log file given: name serve's --decision-log file, the provider's --audit file, or both; run "acpguard log --help"`)
	}
	if opts.Follow && opts.Summary {
		return opts, usagef("--follow and --summary: both given; a summary is of the files as they are")
	}
	known := slices.Concat([]string{outcomeAllowed, outcomeDenied, outcomeFailed}, serveFailureCategories[:])
	if outcome.count > 0 && !slices.Contains(known, opts.Outcome) {
		return opts, usagef("--outcome %q: want one of %s", opts.Outcome, strings.Join(known, ", "))
	}
	if since.count > 0 {
		t, err := parseSince(since.value, now)
		if err != nil {
			return opts, err
		}
		opts.Since = t
	}
	return opts, nil
}

// parseSince reads --since: an RFC 3339 time, or a duration back from now.
func parseSince(raw string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, raw); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(raw); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--since %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (90m, 24h)", raw)
}

// splitFlagsAndArgs separates the flags of fs, each with its value, from
// the other arguments, so that flags may follow them: "--" ends the flags,
// and a flag that takes a value and has no "=" takes the next argument. An
// unknown flag stays with the flags, for parseFlags to refuse by name.
func splitFlagsAndArgs(fs *flag.FlagSet, args []string) (flags, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(rest, args[i+1:]...)
		case len(a) < 2 || a[0] != '-':
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if hasValue || f == nil || i+1 == len(args) {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		i++
		flags = append(flags, args[i])
	}
	return flags, rest
}
