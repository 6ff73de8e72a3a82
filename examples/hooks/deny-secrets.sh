#!/bin/sh
# A PreToolUse hook (Qwen Code's format, run by acpguard before the guard):
# blocks any tool call whose input names a secret file, allows the rest.
#
# Input: one JSON object on stdin, {"session_id", "cwd", "hook_event_name",
# "permission_mode", "tool_name", "tool_input": {...}, "tool_use_id"}.
# Answer: exit 0 lets the call go on to the next layer (rules, the approval
# mode, the guard); exit 2 blocks it, and what is printed on stderr is the
# reason the user and the model see. Any other exit status is a failed hook:
# acpguard then blocks the call unless the hook's settings entry says
# "failOpen": true.
#
# POSIX sh and no jq: the whole input is matched as text, so a secret name
# anywhere in the call (a path, a shell command, file content) blocks it.
# Edit the patterns below to suit your workspace.
input=$(cat)
case $input in
*'.env"'* | *'.env '* | *'.env/'* | *'/.ssh/'* | *'id_rsa'* | *'id_ed25519'* | \
*'.pem"'* | *'.key"'* | *'/.aws/credentials'* | *'/.netrc'* | *'.git-credentials'*)
	echo "deny-secrets: the call names a secret file (.env, SSH or cloud keys, .pem, .key)" >&2
	exit 2
	;;
esac
exit 0
