// serve_console.go owns serve's console (DESIGN.md §7): the one page, its
// stylesheet and script embedded in the binary and served before
// authentication (they hold no data), the strict headers every console
// reply carries, the read-only routes under /console/api/ the page reads
// beside the Qwen routes, and --open, which hands the system browser the
// page with the host token in the URL fragment.
package main

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// consoleFiles are the page and its assets: no build step, no external
// request of any kind, at most maxConsoleAssetBytes together.
//
//go:embed console/index.html console/app.css console/app.js
var consoleFiles embed.FS

// maxConsoleAssetBytes bounds the page and its assets together: the
// console is a plain page, not an application to download.
const maxConsoleAssetBytes = 60 << 10

// Console paths. The page is GET /; its assets and its API live under
// /console/, beside the Qwen routes, which do not change.
const (
	consolePagePath     = "/"
	consoleAssetPrefix  = "/console/"
	consoleAPISessions  = "/console/api/sessions"
	consoleAPIDecisions = "/console/api/decisions"
	consoleAPIHealth    = "/console/api/health"
)

// consoleAsset is one embedded file at the path the page names it by.
type consoleAsset struct {
	path, file, contentType string
}

// consoleFavicon is where a browser looks for a page's icon unasked: the
// console has none, and answers 204 rather than a 401 logged per visit.
const consoleFavicon = "/favicon.ico"

var consoleAssets = []consoleAsset{
	{consolePagePath, "console/index.html", "text/html; charset=utf-8"},
	{consoleAssetPrefix + "app.css", "console/app.css", "text/css; charset=utf-8"},
	{consoleAssetPrefix + "app.js", "console/app.js", "text/javascript; charset=utf-8"},
	{consoleFavicon, "", ""},
}

// consoleCSP is the Content-Security-Policy of every console reply: the
// page loads its own script and stylesheet and nothing else, runs no
// inline script or style, talks only to serve, and is never framed.
const consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleHeaders sets the headers every console reply carries, its
// errors included.
func consoleHeaders(h http.Header) {
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// consoleRoutes adds the page, its assets and the console API to mux.
func (d *daemon) consoleRoutes(mux *http.ServeMux) {
	for _, a := range consoleAssets {
		if a.file == "" {
			mux.HandleFunc("GET "+a.path, func(w http.ResponseWriter, r *http.Request) {
				consoleHeaders(w.Header())
				w.WriteHeader(http.StatusNoContent)
			})
			continue
		}
		body, err := consoleFiles.ReadFile(a.file)
		if err != nil {
			panic("console asset " + a.file + " is not embedded")
		}
		pattern := "GET " + a.path
		if a.path == consolePagePath {
			pattern = "GET /{$}" // "/" alone, not every path
		}
		contentType := a.contentType
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			consoleHeaders(w.Header())
			writeReply(w, http.StatusOK, contentType, body)
		})
	}
	api := func(path string, h http.HandlerFunc) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			consoleHeaders(w.Header())
			h(w, r)
		})
	}
	api(consoleAPISessions, d.handleConsoleSessions)
	api(consoleAPIDecisions, d.handleConsoleDecisions)
	api(consoleAPIHealth, d.handleConsoleHealth)
}

// consoleOpen reports whether r asks for the page or one of its assets,
// which hold no data and are served without the host token, as a browser
// fetches them before the page can ask for it. The console API is not.
func (d *daemon) consoleOpen(r *http.Request) bool {
	if !d.console || r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return slices.ContainsFunc(consoleAssets, func(a consoleAsset) bool { return a.path == r.URL.Path })
}

// Session states the console shows.
const (
	consoleStateIdle    = "idle"
	consoleStateRunning = "running"
	consoleStateWaiting = "waiting_for_decision"
	consoleStateDied    = "died"
)

type consoleSession struct {
	SessionID      string              `json:"sessionId"`
	Workspace      string              `json:"workspace"`
	State          string              `json:"state"`
	CreatedAt      string              `json:"createdAt"`
	ActivePromptID string              `json:"activePromptId,omitempty"`
	QueuedPrompts  int                 `json:"queuedPrompts"`
	Pending        []consolePermission `json:"pendingPermissions"`
	// Sandbox is the sandbox profile serve gives the session's child.
	Sandbox string `json:"sandbox"`
}

type consolePermission struct {
	RequestID string                 `json:"requestId"`
	PromptID  string                 `json:"promptId,omitempty"`
	ToolCall  any                    `json:"toolCall"`
	Options   []hostPermissionOption `json:"options"`
}

// handleConsoleSessions lists the live sessions, oldest first, with what
// each is doing and the permission requests it waits on.
func (d *daemon) handleConsoleSessions(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	sessions := make([]*hostSession, 0, len(d.sessions))
	for _, s := range d.sessions {
		sessions = append(sessions, s)
	}
	d.mu.Unlock()
	slices.SortFunc(sessions, func(a, b *hostSession) int { return a.created.Compare(b.created) })
	profile := d.sandbox.report().Profile
	out := []consoleSession{}
	for _, s := range sessions {
		s.mu.Lock()
		if s.ended && !s.dead {
			s.mu.Unlock()
			continue
		}
		cs := consoleSession{SessionID: s.id, Workspace: s.ws, State: consoleStateIdle, CreatedAt: s.created.UTC().Format(createdAtLayout),
			QueuedPrompts: len(s.queue), Pending: []consolePermission{}, Sandbox: profile}
		if s.active != nil {
			cs.State, cs.ActivePromptID = consoleStateRunning, s.active.id
		}
		for id, p := range s.perms {
			var call any = p.toolCall
			if p.toolCall == nil {
				call = struct{}{}
			}
			cs.Pending = append(cs.Pending, consolePermission{RequestID: id, PromptID: p.promptID, ToolCall: call, Options: p.options})
		}
		if len(cs.Pending) > 0 {
			cs.State = consoleStateWaiting
		}
		if s.dead {
			cs.State = consoleStateDied
		}
		s.mu.Unlock()
		slices.SortFunc(cs.Pending, func(a, b consolePermission) int { return strings.Compare(a.RequestID, b.RequestID) })
		out = append(out, cs)
	}
	writeHostJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

// Bounds of GET /console/api/decisions.
const (
	// consoleDecisionsDefault and consoleDecisionsMax are how many of the
	// newest decisions one answer holds, by default and at most.
	consoleDecisionsDefault = 100
	consoleDecisionsMax     = 1000
	// consoleLogTail is how much of the decision log's end is read: the
	// newest decisions are there, and a long-running serve's log is never
	// read whole for one page view.
	consoleLogTail = 8 << 20
)

// consoleDecision is one decision as the console shows it: never its
// arguments, which --decision-log-arguments may have put in the line.
type consoleDecision struct {
	Time       string `json:"time"`
	Outcome    string `json:"outcome"`
	ToolName   string `json:"toolName"`
	Reason     string `json:"reason,omitempty"`
	SessionID  string `json:"sessionId"`
	PromptID   string `json:"promptId"`
	ToolCallID string `json:"toolCallId"`
	RequestID  string `json:"requestId,omitempty"`
}

type consoleDecisions struct {
	DecisionLog string            `json:"decisionLog"`
	Decisions   []consoleDecision `json:"decisions"`
	// Skipped counts the lines read that were not records.
	Skipped int    `json:"skipped"`
	Note    string `json:"note,omitempty"`
}

// consoleNoDecisionLog says why the console shows no decision.
const consoleNoDecisionLog = "serve writes its decision log to stderr: start it with --decision-log FILE to see the decisions here"

// handleConsoleDecisions answers the newest decisions of serve's decision
// log, newest first, read with the reader of "acpguard log" and filtered
// as its --outcome, --tool and --session filter (?outcome=, ?tool=,
// ?session=); ?limit= bounds how many.
func (d *daemon) handleConsoleDecisions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := logFilter{Outcome: q.Get("outcome"), Tool: q.Get("tool"), Session: q.Get("session")}
	known := slices.Concat([]string{outcomeAllowed, outcomeDenied, outcomeFailed}, serveFailureCategories[:])
	if f.Outcome != "" && !slices.Contains(known, f.Outcome) {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("outcome %q: want one of %s", f.Outcome, strings.Join(known, ", ")))
		return
	}
	limit := consoleDecisionsDefault
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > consoleDecisionsMax {
			writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("limit %q: want 1 through %d", v, consoleDecisionsMax))
			return
		}
		limit = n
	}
	res := consoleDecisions{DecisionLog: d.decisionLogPath, Decisions: []consoleDecision{}}
	if d.decisionLogPath == "" {
		res.Note = consoleNoDecisionLog
		writeHostJSON(w, http.StatusOK, res)
		return
	}
	lr, err := openLogReaderTail(d.decisionLogPath, consoleLogTail)
	if err != nil {
		writeHostError(w, http.StatusInternalServerError, codeInternal, fmt.Sprintf("read the decision log: %v", err))
		return
	}
	defer lr.f.Close()
	// The newest limit records, in a ring.
	ring := make([]consoleDecision, 0, limit)
	next := 0
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errLogLineTooLong) {
			res.Skipped++
			continue
		} else if err != nil {
			writeHostError(w, http.StatusInternalServerError, codeInternal, err.Error())
			return
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		rec, err := parseLogRecord(line)
		if err != nil {
			res.Skipped++
			continue
		}
		if !f.keep(&rec) {
			continue
		}
		cd := consoleDecision{Time: rec.Time, Outcome: rec.Outcome, ToolName: rec.ToolName, Reason: rec.Reason,
			SessionID: rec.SessionID, PromptID: rec.PromptID, ToolCallID: rec.ToolCallID, RequestID: rec.RequestID}
		if len(ring) < limit {
			ring = append(ring, cd)
		} else {
			ring[next] = cd
		}
		next = (next + 1) % limit
	}
	for i := range ring {
		res.Decisions = append(res.Decisions, ring[(next-1-i+2*len(ring))%len(ring)])
	}
	writeHostJSON(w, http.StatusOK, res)
}

type consoleHealth struct {
	// Guard is /capabilities' guard; Provider says how its handshake went.
	Guard    string `json:"guard"`
	Provider string `json:"provider"`
	Calls    struct {
		Allowed int64 `json:"allowed"`
		Denied  int64 `json:"denied"`
		Failed  int64 `json:"failed"`
	} `json:"calls"`
	PermissionsWaiting int `json:"permissionsWaiting"`
	Sessions           int `json:"sessions"`
	Children           int `json:"children"`
}

// handleConsoleHealth answers what of /metrics matters to a person: the
// guard's decisions, the permission requests waiting, the sessions.
func (d *daemon) handleConsoleHealth(w http.ResponseWriter, r *http.Request) {
	var h consoleHealth
	h.Guard, h.Provider = d.guardMode(), "none: off mode asks no provider"
	if d.guarded {
		h.Provider = "handshake succeeded with " + d.provider.identity().String()
	}
	if d.obs != nil {
		h.Calls.Allowed = d.obs.decisions[decisionAllowed].Load()
		h.Calls.Denied = d.obs.decisions[decisionDenied].Load()
		h.Calls.Failed = d.obs.decisions[decisionFailed].Load()
	}
	d.mu.Lock()
	h.Sessions, h.Children = d.liveSessionsLocked(), len(d.chans)
	sessions := make([]*hostSession, 0, len(d.sessions))
	for _, s := range d.sessions {
		sessions = append(sessions, s)
	}
	d.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		h.PermissionsWaiting += len(s.perms)
		s.mu.Unlock()
	}
	writeHostJSON(w, http.StatusOK, h)
}

// envBrowser names the browser --open starts, as xdg-open reads it; unset,
// --open runs consoleOpener.
const (
	envBrowser    = "BROWSER"
	consoleOpener = "xdg-open"
)

// consoleURL is the page's address for a browser: the host token, when
// serve has one, rides in the fragment, which a browser never sends; the
// page takes it and removes it from the address bar at once.
func consoleURL(base, token string) string {
	if token == "" {
		return base + consolePagePath
	}
	return base + consolePagePath + "#token=" + token
}

// openConsole starts the system browser at the console, as Qwen Code's
// serve --open does: $BROWSER's first command, else xdg-open. It waits
// for nothing; a browser that cannot start is logged, never fatal.
func openConsole(env *procEnv, log *slog.Logger, base, token string) {
	opener := consoleOpener
	if b := strings.TrimSpace(strings.Split(env.lookup(envBrowser), ":")[0]); b != "" {
		opener = b
	}
	cmd := exec.Command(opener, consoleURL(base, token))
	// The operator's browser, not a tool's process: the launcher's
	// confinement is not its, but its environment is the builder's, so no
	// secret of serve's reaches it.
	cmd.Env = env.childEnv()
	if err := cmd.Start(); err != nil {
		log.Warn("open the console: the browser did not start; open the page yourself", "browser", opener, "url", base+consolePagePath, "err", err)
		return
	}
	log.Info("console opened in the browser", "browser", opener, "url", base+consolePagePath)
	go cmd.Wait()
}

// consoleSignIn names where the console's token comes from, for the
// startup log: the token itself is never logged.
func consoleSignIn(opts serveOptions) string {
	if opts.Token == "" {
		return "no sign-in: serve has no host token"
	}
	if opts.TokenFile != "" {
		return "sign in with the host token in " + opts.TokenFile
	}
	return "sign in with the host token serve was given"
}

// Flags of the console, Qwen Code's names.
const (
	flagNoWeb = "no-web"
	flagOpen  = "open"
)
