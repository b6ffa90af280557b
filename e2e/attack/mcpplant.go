package main

import (
	"os"
	"path/filepath"
)

// mcpplant: an MCP server loads code the agent wrote — plant, from inside
// a run, everything an interpreter started in the agent's view might load
// by itself: MODULE.py in /workspace (python3 -m MODULE with cwd
// /workspace), usercustomize.py and a .pth in the agent home's user site,
// and a node module MODULE in $HOME/.node_modules and $HOME/.node_libraries.
// Each writes /home/agent/canary-KIND when it runs. Prints planted=N.
//
//	mcpplant MODULE PYVERSION
func init() { register("mcpplant", mcpplant) }

func mcpplant(args []string) int {
	if len(args) != 2 {
		say("error", "usage: mcpplant MODULE PYVERSION")
		return 2
	}
	mod, pyv := args[0], args[1]
	py := func(kind string) string {
		return "open('/home/agent/canary-" + kind + "', 'w').write('ran')\n"
	}
	js := func(kind string) string {
		return "require('fs').writeFileSync('/home/agent/canary-" + kind + "', 'ran');\nmodule.exports = {};\n"
	}
	site := filepath.Join("/home/agent/.local/lib", "python"+pyv, "site-packages")
	files := map[string]string{
		filepath.Join("/workspace", mod+".py"):                      py("module"),
		filepath.Join(site, "usercustomize.py"):                     py("usercustomize"),
		filepath.Join(site, "ctx-planted.pth"):                      "import os; " + py("pth"),
		filepath.Join("/home/agent/.node_modules", mod, "index.js"): js("node_modules"),
		filepath.Join("/home/agent/.node_libraries", mod+".js"):     js("node_libraries"),
	}
	n := 0
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			say("error", err)
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			say("error", err)
			continue
		}
		n++
	}
	say("planted", n)
	if n != len(files) {
		return 1
	}
	return 0
}
