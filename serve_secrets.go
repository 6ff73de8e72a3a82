// serve_secrets.go owns the variables serve learns are secrets after its
// children started: a workspace's settings changed while serve runs may
// name new ones (a remote MCP server's headers, an http hook's
// allowedEnvVars). serve takes them out of its own environment, as
// it takes at start those of the workspaces it is given, and tells every
// child that started before (methodEnvHide), which takes them out of its
// environment before it starts anything more: a tool of any session of
// that child no longer gets them (DESIGN.md §4).
package main

import "slices"

// workspaceSettings is ws's settings as serve reads them for its remote MCP
// servers and http hooks. When reading them hid variables, every child
// that started before is told, whatever the caller then does with them.
func (d *daemon) workspaceSettings(ws string) (*sessionSettings, error) {
	ss, _, err := d.mcpSettings.get(ws)
	if d.untold.Swap(false) {
		d.hideLearned()
	}
	return ss, err
}

// hideLearned hides names in serve's environment and tells the children
// that started before every hidden name they were not told: those too that
// the settings cache hid when it read a workspace's settings. The readers
// of those settings (mcpList, hookHTTP) call it once they have them.
func (d *daemon) hideLearned(names ...string) {
	envOf(d.sys).hideSecrets(names...)
	d.mu.Lock()
	pool := slices.Clone(d.pool)
	d.mu.Unlock()
	for _, ch := range pool {
		d.tellHidden(ch)
	}
}

// tellHidden sends ch the hidden names it has not been told. Each session
// placed on ch is told first (newSession), so no session's tool starts
// on a child that still holds a variable serve hid, even one hidden while
// the child started. A tell in progress on ch finishes before another
// returns: no caller goes on before the names it found untold were sent.
func (d *daemon) tellHidden(ch *acpChannel) {
	ch.telling.Lock()
	defer ch.telling.Unlock()
	hidden := envOf(d.sys).hiddenNames()
	d.mu.Lock()
	var names []string
	for _, n := range hidden {
		if !slices.Contains(ch.told, n) {
			names = append(names, n)
		}
	}
	ch.told = append(ch.told, names...)
	d.mu.Unlock()
	for len(names) > 0 && !ch.ended() {
		batch := names[:min(len(names), maxEnvHideNames)]
		names = names[len(batch):]
		if err := ch.conn.notify(methodEnvHide, envHideParams{Names: batch}); err != nil {
			d.obs.logger().Warn("ACP child ended: the variables serve hid could not be sent to it", "pid", ch.cmd.Process.Pid, "err", err)
			ch.stop()
			return
		}
	}
}
