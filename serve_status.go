// serve_status.go owns the two documents a host reads about a running serve
// (DESIGN.md §7): GET /capabilities and GET /daemon/status, in the shape
// Qwen Code's serve answers them, filled only with what acpguard does.
// qwenCodeVersion names the version of Qwen Code's host API acpguard
// implements (qwenHostAPIVersion), never a claim to be Qwen Code;
// acpguardVersion names acpguard's own.
package main

import (
	"net/http"
	"os"
	"slices"
	"time"
)

type protocolVersions struct {
	Current   string   `json:"current"`
	Supported []string `json:"supported"`
}

// qwenHostAPIVersion is the Qwen Code release whose host API, settings and
// ACP surface acpguard implements: a host that gates on qwenCodeVersion
// reads the API it gets.
const qwenHostAPIVersion = "0.24.4"

type hostPolicy struct {
	Permission string `json:"permission"` // the first vote resolves a request
}

// hostLimits are serve's limit options as a host reads them; a 0 duration
// means none.
type hostLimits struct {
	MaxPendingPromptsPerSession int `json:"maxPendingPromptsPerSession"`
	// Qwen Code's names of the same limits: every session of every
	// workspace counts against --max-sessions, so one workspace may hold
	// them all; the workspaces are the --workspace ones, none registered
	// later. Qwen's limits acpguard has no counterpart of (file uploads,
	// channel control, session restore) are absent.
	MaxSessionsPerWorkspace int `json:"maxSessionsPerWorkspace"`
	MaxTotalSessions        int `json:"maxTotalSessions"`
	MaxRegisteredWorkspaces int `json:"maxRegisteredWorkspaces"`
	// acpguard's own names.
	MaxSessions                 int   `json:"maxSessions"`
	MaxSubscribersPerSession    int   `json:"maxSubscribersPerSession"`
	EventRingSize               int   `json:"eventRingSize"`
	MaxEventMemoryBytes         int64 `json:"maxEventMemoryBytes"`
	InitializeTimeoutMs         int64 `json:"initializeTimeoutMs"`
	PromptDeadlineMs            int64 `json:"promptDeadlineMs"`
	PermissionResponseTimeoutMs int64 `json:"permissionResponseTimeoutMs"`
	SessionIdleTimeoutMs        int64 `json:"sessionIdleTimeoutMs"`
	// MaxChildren is acpguard's own: the ACP processes the sessions of
	// every workspace are placed on (--max-children).
	MaxChildren int `json:"maxChildren"`
}

// hostWorkspace is one --workspace. Every one is trusted: acpguard has no
// untrusted-folder mode, and none can be added or removed while serving.
type hostWorkspace struct {
	ID               string `json:"id"`
	Cwd              string `json:"cwd"`
	Primary          bool   `json:"primary"`
	Trusted          bool   `json:"trusted"`
	WorkflowsEnabled bool   `json:"workflowsEnabled"`
	Removable        bool   `json:"removable"`
}

type capabilitiesBody struct {
	V                int              `json:"v"`
	ProtocolVersions protocolVersions `json:"protocolVersions"`
	QwenCodeVersion  string           `json:"qwenCodeVersion"`
	AcpguardVersion  string           `json:"acpguardVersion"`
	Mode             string           `json:"mode"`
	// Guard is acpguard's own key: "required" when every tool call waits
	// for the provider's decision, "off" when none is asked (DESIGN.md §1).
	// Qwen Code's policy object is about permission votes, not this.
	Guard string `json:"guard"`
	// Console is acpguard's own: serve answers its console at / and
	// /console/ (off with --no-web).
	Console      bool            `json:"console"`
	Features     []string        `json:"features"`
	Transports   []string        `json:"transports"`
	Policy       hostPolicy      `json:"policy"`
	Limits       hostLimits      `json:"limits"`
	Workspaces   []hostWorkspace `json:"workspaces"`
	WorkspaceCwd string          `json:"workspaceCwd"`
	// ModelServices and SupportedLanguages are Qwen Code's lists of
	// services and languages a host may pick; acpguard offers neither.
	ModelServices      []string `json:"modelServices"`
	SupportedLanguages []string `json:"supportedLanguages"`
	// Sandbox is what confines the children's tools; absent in off mode
	// with the sandbox off.
	Sandbox *sandboxReport `json:"sandbox,omitempty"`
}

const hostMode = "http-bridge"

func (d *daemon) hostLimits() hostLimits {
	l := d.limits
	return hostLimits{
		MaxPendingPromptsPerSession: d.maxPending,
		MaxSessionsPerWorkspace:     l.MaxSessions,
		MaxTotalSessions:            l.MaxSessions,
		MaxRegisteredWorkspaces:     len(d.workspaces),
		MaxSessions:                 l.MaxSessions,
		MaxSubscribersPerSession:    l.MaxSubscribers,
		EventRingSize:               l.EventRingSize,
		MaxEventMemoryBytes:         l.MaxEventMemory,
		InitializeTimeoutMs:         l.InitializeTimeout.Milliseconds(),
		PromptDeadlineMs:            l.PromptDeadline.Milliseconds(),
		PermissionResponseTimeoutMs: l.PermissionTimeout.Milliseconds(),
		SessionIdleTimeoutMs:        l.SessionIdleTimeout.Milliseconds(),
		MaxChildren:                 l.MaxChildren,
	}
}

func (d *daemon) capabilities() capabilitiesBody {
	features := slices.Clone(baseFeatures)
	if d.guarded {
		features = append(features, featureExternalToolGuard)
	}
	body := capabilitiesBody{
		V:                  1,
		ProtocolVersions:   protocolVersions{Current: "v1", Supported: []string{"v1"}},
		QwenCodeVersion:    qwenHostAPIVersion,
		AcpguardVersion:    version,
		Mode:               hostMode,
		Guard:              d.guardMode(),
		Console:            d.console,
		Features:           features,
		Transports:         []string{"rest"},
		Policy:             hostPolicy{Permission: "first-responder"},
		Limits:             d.hostLimits(),
		WorkspaceCwd:       d.workspaces[0],
		ModelServices:      []string{},
		SupportedLanguages: []string{},
	}
	for i, ws := range d.workspaces {
		body.Workspaces = append(body.Workspaces, hostWorkspace{ID: ws, Cwd: ws, Primary: i == 0, Trusted: true})
	}
	if d.sandbox.reported(d.guarded) {
		r := d.sandbox.report()
		body.Sandbox = &r
	}
	return body
}

// guardMode is /capabilities' guard: required only once the handshake
// completed, which serve needs before it listens.
func (d *daemon) guardMode() string {
	if d.guarded {
		return guardModeRequired
	}
	return guardModeOff
}

func (d *daemon) handleCapabilities(w http.ResponseWriter, r *http.Request) {
	writeHostJSON(w, http.StatusOK, d.capabilities())
}

type daemonStatusBody struct {
	V            int              `json:"v"`
	Detail       string           `json:"detail"`
	GeneratedAt  string           `json:"generatedAt"`
	Status       string           `json:"status"`
	Issues       []string         `json:"issues"`
	Daemon       statusDaemon     `json:"daemon"`
	Security     statusSecurity   `json:"security"`
	Limits       hostLimits       `json:"limits"`
	Capabilities capabilitiesBody `json:"capabilities"`
	Runtime      statusRuntime    `json:"runtime"`
}

type statusDaemon struct {
	PID             int    `json:"pid"`
	UptimeMs        int64  `json:"uptimeMs"`
	Mode            string `json:"mode"`
	WorkspaceCwd    string `json:"workspaceCwd"`
	QwenCodeVersion string `json:"qwenCodeVersion"`
	AcpguardVersion string `json:"acpguardVersion"`
}

type statusSecurity struct {
	TokenConfigured bool `json:"tokenConfigured"`
	RequireAuth     bool `json:"requireAuth"`
	LoopbackBind    bool `json:"loopbackBind"`
}

type statusRuntime struct {
	Sessions struct {
		Active int `json:"active"`
	} `json:"sessions"`
	Permissions struct {
		Pending int `json:"pending"`
	} `json:"permissions"`
	// Children is acpguard's own: the live ACP children, at most
	// limits.maxChildren.
	Children struct {
		Active int `json:"active"`
	} `json:"children"`
}

// isoMillis is the time format of generatedAt, as JavaScript's toISOString.
const isoMillis = "2006-01-02T15:04:05.000Z07:00"

func (d *daemon) handleDaemonStatus(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body := daemonStatusBody{
		V:           1,
		Detail:      "summary",
		GeneratedAt: now.UTC().Format(isoMillis),
		Status:      "ok",
		Issues:      []string{},
		Daemon: statusDaemon{PID: os.Getpid(), UptimeMs: now.Sub(d.started).Milliseconds(), Mode: hostMode,
			WorkspaceCwd: d.workspaces[0], QwenCodeVersion: qwenHostAPIVersion, AcpguardVersion: version},
		Security:     statusSecurity{TokenConfigured: d.token != "", RequireAuth: d.requireAuth, LoopbackBind: d.checkHost},
		Limits:       d.hostLimits(),
		Capabilities: d.capabilities(),
	}
	d.mu.Lock()
	sessions := make([]*hostSession, 0, len(d.sessions))
	for _, s := range d.sessions {
		sessions = append(sessions, s)
	}
	body.Runtime.Children.Active = len(d.chans)
	d.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		if !s.ended {
			body.Runtime.Sessions.Active++
			body.Runtime.Permissions.Pending += len(s.perms)
		}
		s.mu.Unlock()
	}
	writeHostJSON(w, http.StatusOK, body)
}
