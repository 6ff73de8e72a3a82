// config_usage.go owns the --help text of every subcommand.
package main

const demoUsage = `Usage: acpguard demo [--keep]

Runs the guarded path end to end in a temporary workspace: the reference
provider with a built-in sample policy, serve in required mode, one session,
and three scripted prompts: an allowed write, a shell command the policy
denies, and a call made after the provider was stopped. Prints a transcript
and cleans everything up.

Flags:
  --keep
        after the transcript, start the provider again, leave it and serve
        running and print curl commands to drive them by hand; stop with
        Ctrl-C.
  -h, --help
        print this text.
`

const guardFlagsUsage = `  --external-tool-guard-mode off|required
        off (default): no provider is constructed or called, and one warning
        line on stderr at start says so unless off is given explicitly.
        required: every tool call needs one allow from the policy provider,
        asked exactly once right before the tool runs; any failure denies.
  --external-tool-guard-endpoint URL
        the provider's origin, required in required mode: http or https, host
        127.0.0.1, localhost or [::1], optional port, no path, query, fragment
        or userinfo. Example: http://127.0.0.1:8787
  --external-tool-guard-timeout-ms N
        bound on one provider call, in milliseconds: 100 through 30000
        (default 3000).
  --external-tool-guard-startup-wait-ms N
        how long the first handshake is retried while nothing listens at
        the endpoint (a provider started at the same time), in
        milliseconds: 100 through 30000 (default 10000); then exit 1.
  --external-tool-guard-token-file FILE
        read the provider's bearer token from FILE once at start, instead of
        QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN (both is an error): a regular file
        of the current user, mode 0600 or stricter, not a symbolic link; one
        trailing newline is removed, then the variable's rules apply. Read
        only in required mode.
`

const scrubUsage = `Children (tools, hooks, MCP servers, ACP children) never see the variables
above, nor LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, BASH_ENV, ENV or BASH_FUNC_*.
`

const providerUsage = `Usage: acpguard provider --policy FILE [flags]
       acpguard provider --opa URL [flags]
       acpguard provider check --policy FILE [--cases FILE | --explain CALL]

Runs the reference policy provider: POST /v1/handshake and POST /v1/prepare
on a loopback HTTP(S) address, one decision per prepare from the policy file,
and GET /metrics. "acpguard provider check" tests a policy without serving
(see "acpguard provider check --help").

Flags:
  --listen HOST:PORT
        loopback address to listen on: host 127.0.0.1, localhost or [::1];
        port 0 picks a free one (default 127.0.0.1:8787).
  --policy FILE
        the JSON policy file (required unless --opa); reloaded on SIGHUP.
  --opa URL
        ask an Open Policy Agent sidecar instead of a policy file: each
        prepare is POSTed to URL, http on loopback with the path
        /v1/data/<package>/<rule>, as {"input": the prepare request plus
        "commands" and "complex", its parsed shell commands}. The rule must
        yield {"allow": bool} or {"allow": false, "reason": string}; anything
        else, no answer within 2s or a status other than 200 is a denial.
        Example: --opa http://127.0.0.1:8181/v1/data/acpguard/decision
  --audit FILE|-
        append one JSON line per decision to FILE, or to stdout with "-"
        (default: no audit log).
  --audit-arguments
        put the raw arguments in the audit log and the debug log, not only
        their SHA-256.
  --shadow
        shadow rollout: evaluate the policy, log the decision it would have
        made ("shadow":true and "wouldDecide" in every audit line, a warning
        per call on stderr), and answer allow to every well-formed prepare.
        Clients never fail open; only this provider does, and says so.
  --tls-cert FILE, --tls-key FILE
        serve HTTPS with this PEM certificate chain and key (both or neither).
        Clients verify it with their system roots (SSL_CERT_FILE, SSL_CERT_DIR).
  --log-format text|json
        format of the log on stderr (default text).
  --log-level debug|info|warn|error
        least severe level logged (default info). debug logs every decision
        (identity, tool, rule, argument hash) and each TLS client's server name.
  -h, --help
        print this text.

Metrics: GET /metrics answers in the Prometheus text format 0.0.4 and, like
every route, requires the bearer token (Prometheus: authorization.credentials).

Logs never contain the token, and raw arguments only with --audit-arguments.

Environment:
  QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN
        the bearer token every client must send (required); read and removed
        from the environment at start.
  QWEN_SERVER_TOKEN
        read and removed at start; not used.
  GOMAXPROCS
        unset, the provider runs on one scheduler slot while at most eight
        requests are in progress and on the runtime's own number above that;
        set, it is kept as given.

` + scrubUsage

const providerCheckUsage = `Usage: acpguard provider check --policy FILE [--cases FILE]
       acpguard provider check --policy FILE --explain CALL

Validates a policy file as the provider does at startup (exit 2 when it is
invalid), then decides every example case of the cases file and compares the
decision with the expected one. Prints each mismatch with the rule that
decided, then "N passed, M failed". Exit 0 when every case passes, 1 on any
mismatch, 2 on an invalid policy or cases file.

Flags:
  --policy FILE
        the JSON policy file (required).
  --cases FILE
        the cases file (default: the policy's name with .json replaced by
        .cases.json, e.g. policy.cases.json beside policy.json; when that file
        does not exist only the policy is validated).
  --explain CALL
        decide one call and explain it: CALL is a JSON object
        {"tool": "...", "arguments": {...}} or, for run_shell_command, the
        command text alone. Prints the simple commands the shell parser found
        (after quote removal and wrappers, and why a command is complex),
        the rule that met each, and the decision. Exit 0 whatever it is.
  -h, --help
        print this text.

Cases file: a JSON array, strictly decoded, of
  {"name": "optional label", "tool": "canonical_tool_name",
   "arguments": {...final arguments...}, "expect": "allow" | "deny",
   "reason": "optional: the exact denial reason a client would show"}
A deny without a reason shows "` + denyDefaultReason + `".

Environment:
  QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN, QWEN_SERVER_TOKEN
        read and removed at start; not used.
`

const acpUsage = `Usage: acpguard acp [flags]

Runs the guarded ACP v1 agent on stdin/stdout: JSON-RPC 2.0, one message per
line. Logs go to stderr.

Flags:
` + guardFlagsUsage + `  --model scripted|openai|parent
        the model: the built-in scripted model (default), an
        OpenAI-compatible chat completions service (default when
        OPENAI_BASE_URL is set), or parent: acpguard serve makes the model
        calls with its own key (set by serve; stdin and stdout must then be
        a Unix socket).
  --model-key-file FILE
        read the model's API key from FILE once at start, instead of
        OPENAI_API_KEY (both is an error); the file rules of the token file
        above.
  --settings FILE
        settings in Qwen Code's format: tools.approvalMode, tools.disabled,
        permissions.allow|ask|deny, hooks.PreToolUse, model.name,
        model.maxSessionTurns, slashCommands.disabled, mcpServers, mcp.callTimeoutMs,
        tools.sandbox (true|false), tools.sandboxRead, tools.sandboxWrite,
        tools.sandboxHide, tools.sandboxNetwork, tools.sandboxUnix (a flag
        wins over its key; hidden paths add up).
        It is the last of the settings files read, and wins: system
        defaults, ~/.qwen/settings.json ($QWEN_HOME/settings.json), the
        .qwen/settings.json of each session's cwd (read at session/new),
        the system file, then FILE, merged as Qwen Code merges them. In
        required mode the workspace file is untrusted: its hooks, MCP servers, allow rules, sandbox, model
        endpoint and env keys, and a looser approval mode, are dropped and
        logged.
  --no-user-settings
        read only FILE and the system files: never ~/.qwen nor the
        workspace's .qwen/settings.json.
  --trust-workspace-settings
        in required mode, apply the workspace's .qwen/settings.json whole
        and its .env, as Qwen Code does for a trusted folder.
  --allow-slash-command NAME
        (repeatable) a slash command a managed child may run; set by serve.
  --disabled-slash-commands NAME[,NAME...]
        (repeatable) slash commands refused, added to slashCommands.disabled.
  --permission-response-timeout-ms N
        a permission request the client has not answered after N ms is
        cancelled, so the call does not run and the turn goes on; 0 through
        86400000 (default 0: wait).
  --state-dir DIR|off
        where each session's conversation is saved after every prompt, for
        session/load (prompts, assistant text, calls and their results as
        the client saw them; never the environment or a token). Created
        0700; refused if another user could write it. Default
        $XDG_STATE_HOME/acpguard/sessions, else acpguard/sessions under the
        user cache directory; off for serve's children. off: nothing saved,
        session/load not offered.
  --system-prompt-file FILE
        replaces the built-in system prompt a real model reads first (at most
        64 KiB, read once at start); wins over QWEN_SYSTEM_MD.
` + sandboxFlagsUsage + `  --log-format text|json
        the format of the log on stderr (default text).
  --log-level debug|info|warn|error
        the least severe log level written (default info).
  -h, --help
        print this text.

Environment:
  QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN
        the provider's bearer token, required in required mode unless
        --external-tool-guard-token-file is given; read and removed from the
        environment at start.
  OPENAI_BASE_URL, OPENAI_MODEL
        the OpenAI-compatible service and model name.
  HTTPS_PROXY, HTTP_PROXY, NO_PROXY
        honoured by the model client only; never by the provider's client.
  QWEN_SYSTEM_MD
        1 or true: the system prompt is system.md in QWEN_HOME (default
        ~/.qwen); 0 or false: the built-in one; else the path of a file that
        replaces it. Also read from the settings' env block.
  OPENAI_API_KEY
        its API key unless --model-key-file is given; read and removed at
        start, sent only to that service.
  QWEN_SERVER_TOKEN
        read and removed at start; not used.
  QWEN_CODE_PRIVATE_EXTERNAL_TOOL_GUARD
        required-v1, set only by "acpguard serve" for the ACP children it
        manages: serve decides every guarded call; stdin and stdout must be a
        Unix socket. Read and removed at start.
  QWEN_CODE_PRIVATE_ACP_CAPABILITY
        read and removed at start; not used.
` + settingsEnvUsage + `  GOMAXPROCS
        unset, the runtime runs on one scheduler slot: its work is short steps
        between waits, and one slot answers a guard decision sooner.

` + scrubUsage

const serveUsage = `Usage: acpguard serve [flags]

Runs the managed daemon: a host HTTP API on a loopback address, one private
guarded ACP child per workspace, and in required mode one provider call per
guarded tool call.

Flags:
  --hostname HOST
        address to listen on (default 127.0.0.1). A non-loopback address
        requires a host token (--token, --token-file or QWEN_SERVER_TOKEN).
  --port N
        port to listen on, 0 picks a free one (default 4170).
  --workspace DIR
        a directory sessions may use; repeatable. The first is the default
        session cwd (default: the current directory).
  --settings FILE
        settings file for the ACP children (permissions, hooks, the
        tools.sandbox* keys; a --sandbox* flag wins over its key).
        It is the last of the settings files read, and wins: system
        defaults, ~/.qwen/settings.json ($QWEN_HOME/settings.json), the
        first --workspace's .qwen/settings.json (each child reads its own
        workspace's), the system file, then FILE, merged as Qwen Code
        merges them. In required mode the workspace file is
        untrusted: its hooks, MCP servers, allow rules, sandbox, model
        endpoint and env keys, and a looser approval mode, are dropped and
        logged.
  --no-user-settings
        read only FILE and the system files: never ~/.qwen nor the
        workspace's .qwen/settings.json.
  --trust-workspace-settings
        in required mode, apply the workspace's .qwen/settings.json whole
        and its .env, as Qwen Code does for a trusted folder. Both flags
        pass to every child.
  --system-prompt-file FILE
        replaces the children's built-in system prompt; checked at start and
        passed to every child; wins over QWEN_SYSTEM_MD (as for acp).
  --token T
        bearer token every host request must send; wins over QWEN_SERVER_TOKEN.
        Prefer the variable or --token-file: a flag is visible to other local
        users.
  --token-file FILE
        the host token's file, instead of --token or QWEN_SERVER_TOKEN (with
        either is an error). An existing FILE is read once at start: a regular
        file of the current user, mode 0600 or stricter, not a symbolic link,
        one trailing newline removed. A FILE that does not exist is created
        at start with a new random token (mode 0600, in a directory no other
        user can write to) and kept for the next start.
  --allow-tokenless-loopback
        required mode only: accept host requests without a token on a
        loopback address, as in off mode; warned at start. Without it, and
        without a token, required mode generates a host token into a fresh
        directory under $XDG_RUNTIME_DIR (or the temporary directory), prints
        "acpguard serve: host token in FILE" after the listening line, and
        removes the directory at exit.
  --require-auth
        GET /health needs the host token too; without it, on a loopback
        address, /health is answered without one, as in Qwen Code. Every
        other route always needs the token when one is set. Without a host
        token, exit 2.
  --no-web
        no console: GET / and everything under /console/ answer 404, and
        /capabilities says "console": false.
  --open
        once serve listens, start the system browser ($BROWSER, else
        xdg-open) at the console, the host token in the URL fragment, which
        the browser never sends; the page removes it at once. Local
        processes can read it on the browser's command line while it starts.
` + guardFlagsUsage + `  --model-key-file FILE
        read the model's API key from FILE once at start, instead of
        OPENAI_API_KEY (both is an error); the same file rules as --token-file.
  --decision-log FILE
        append one JSON line per guard decision to FILE (default: stderr).
  --decision-log-arguments
        put each call's arguments, as forwarded to the provider, in its
        decision line (as the provider's --audit-arguments); they are the
        sensitive part of a call, so the default is their SHA-256 only.
        The decision log is then hidden from every tool, as a secret file.
  --max-pending-prompts-per-session N
        prompts one session may queue, 1 through 1000 (default 5).
  --allow-slash-command NAME
        accept prompts starting with /NAME in required mode; repeatable.
  --disabled-slash-commands NAME[,NAME...]
        refuse prompts starting with these commands (400) in every mode and
        disable them in the children; repeatable.
` + sandboxFlagsUsage + `  --log-format text|json
        format of the log on stderr (default text).
  --log-level debug|info|warn|error
        least severe level logged (default info).
  -h, --help
        print this text.

Limits (each hit is answered with a status and a code, logged, and counted
in acpguard_serve_limit_hits_total):
  --max-sessions N
        live sessions, 1 through 10000 (default 32); one more is 503
        session_limit_exceeded with Retry-After.
  --max-children N
        ACP child processes the sessions of every workspace are placed on,
        1 through 64 (default 4); a new session goes to the child with the
        fewest sessions, and a new child starts only while fewer run.
  --max-subscribers-per-session N
        event streams of one session, 1 through 1000 (default 8); one more is
        429 subscriber_limit_exceeded.
  --event-ring-size N
        events each session keeps for Last-Event-ID replay, 1 through 1048576
        (default 4096).
  --initialize-timeout-ms N
        a new ACP child that has not answered initialize by then is killed and
        the session creation fails 503 initialize_timeout; 100 through 600000
        (default 10000).
  --prompt-deadline-ms N
        a prompt still running N ms after it started is cancelled as if the
        host had cancelled it; 0 through 86400000 (default 0: no deadline).
  --permission-response-timeout-ms N
        a permission request the host has not answered after N ms is answered
        cancelled, so the call does not run; 0 through 86400000 (default 0:
        wait).
  --session-idle-timeout-ms N
        a session without a prompt or a host request for N ms is closed with
        session_closed; 1000 through 604800000 (default 1800000).
  --max-event-memory BYTES
        bytes of events that every session's replay ring and every event
        stream's queue may hold together; a K, M or G suffix multiplies by
        1024, 1024^2 or 1024^3; 1M through 1024G (default 256M). Over it the
        oldest events of the largest rings are evicted first, until a
        sixteenth of it is free (code event_memory); a stream that still
        needed them, or that resumes before them, gets stream_dropped.

Host request bodies are at most 1 MiB (413 payload_too_large) and a prompt at
most 256 content blocks (413 prompt_too_large). A host request from one of
serve's own descendants (a tool, a hook, an MCP server, what they start) is
403 host_is_descendant, whatever token it carries.

Metrics: GET /metrics answers in the Prometheus text format 0.0.4 and, like
every route, requires the host token when one is set. Families, all prefixed
acpguard_serve_: decisions_total{outcome}, decision_failures_total{category},
provider_request_duration_seconds (histogram), sessions, sessions_created_total,
prompts_total{result}, tool_executions_total{tool,status}, children,
max_children, children_started_total, children_died_total, limit_hits_total{code},
auth_failures_total{reason}, event_memory_bytes, event_streams, sandbox_enabled,
sandbox_landlock_abi.

Sandbox: serve checks the kernel once at start, gives its choice to every
child as flags, and reports it in GET /capabilities ("sandbox") and the
listening log line.

Logs never contain a token or a tool call's arguments.

Signals: SIGINT and SIGTERM shut down. In required mode SIGHUP runs the provider
handshake again: a provider restarted as this user listens on a new socket,
and calls to it fail (category identity) until a handshake accepts it. A
handshake that fails keeps the provider of the last successful one.

Environment:
  QWEN_SERVER_TOKEN
        bearer token for host requests when --token is not given; read and
        removed from the environment at start.
` + settingsEnvUsage + `  QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN
        the provider's bearer token, required in required mode unless
        --external-tool-guard-token-file is given; read and removed at start,
        kept in the daemon only.
  OPENAI_BASE_URL, OPENAI_MODEL
        the OpenAI-compatible service and model name the children use; without
        them the children run the scripted model. serve makes every model call
        itself, for a session's running prompt only.
  OPENAI_API_KEY
        its API key unless --model-key-file is given; read and removed at
        start, kept in the daemon only and sent only to that service.
  GOMAXPROCS
        unset, serve runs on one scheduler slot while at most two prompts run
        at once and on the runtime's own number above that; set, it is kept
        as given. Children run on one slot unless it is set.

` + scrubUsage

const sandboxFlagsUsage = `  --sandbox off|workspace
        confine every process a tool, a hook or an MCP server starts with the
        kernel's Landlock: writes only under the session cwd, its own temp
        directory and --sandbox-write directories; no access to acpguard's
        own processes; no capabilities. Default: workspace in required mode
        (off, with one warning, on a kernel without Landlock), off in off
        mode. workspace given explicitly on a kernel without Landlock exits 1.
  --sandbox-read PATH
        (repeatable) an existing absolute path confined processes may read
        and run; the list replaces the whole filesystem (the default).
  --sandbox-write DIR
        (repeatable) an existing absolute directory confined processes may
        also write beneath, such as a shared build cache.
  --sandbox-hide PATH
        (repeatable) an absolute path confined processes may not read or run,
        nor anything beneath it, though its directory is readable: ~/.ssh,
        a cloud credentials file. acpguard's own token and key files are
        always hidden. It must not lie in a workspace or a --sandbox-write
        directory, where Landlock cannot keep it out of reach.
  --sandbox-protect PATH
        (repeatable) an absolute path no confined process and no built-in
        file tool may create, change, rename or remove, even beneath a
        writable directory, existing or not; added to what acpguard always
        protects (its trusted settings, its state directory, the home
        directory's dot entries, every git repository's hooks and config).
  --sandbox-network all|none
        none refuses every socket but a Unix one (TCP, UDP, raw, packet,
        netlink) and io_uring; it needs Landlock ABI 4 (Linux 6.7) and exits
        1 on an older kernel (default all).
  --sandbox-unix all|none
        none refuses Unix sockets, so a tool cannot ask a user service manager
        or a terminal multiplexer to start an unconfined process (default all).
  --sandbox-private FILE
        (repeatable) a private file of acpguard's, hidden like a --sandbox-hide
        path whenever the sandbox is on, and no error while it is off; serve
        gives its children its token and key files this way.
  --sandbox-temp DIR
        the existing directory each session's temp directory is made in
        (default: the system's); serve gives each child one of its own and
        removes it once the child has exited.
`

// settingsEnvUsage is the environment that finds the settings files, in
// the --help of each command that reads them.
const settingsEnvUsage = `  HOME, QWEN_HOME
        find the user settings file: $QWEN_HOME/settings.json, else
        $HOME/.qwen/settings.json. $VAR and ${VAR} in settings string values
        are replaced from the environment.
  QWEN_CODE_SYSTEM_SETTINGS_PATH, QWEN_CODE_SYSTEM_DEFAULTS_PATH
        the system settings file (default /etc/qwen-code/settings.json) and
        the system defaults file (default system-defaults.json beside it).
  QWEN_CODE_TRUSTED_FOLDERS_PATH
        the trust rules read when security.folderTrust.enabled is true
        (default trustedFolders.json in the Qwen home); they only narrow
        what required mode trusts.
  .env files
        fill unset variables as in Qwen Code: the workspace's first (in
        required mode only with --trust-workspace-settings, and never the
        model's variables or a token), then $QWEN_HOME/.env and ~/.env.
`
