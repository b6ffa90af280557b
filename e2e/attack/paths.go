package main

import (
	"os"
	"path/filepath"
	"strings"
)

// fsops: file operations a tool tries on what the
// sandbox shows. Arguments are a sequence of operations, each printed as
// OP:PATH=ok or =<error> (or the content read / names listed):
//
//	w PATH WORD          create or truncate PATH (and its parents) with WORD
//	hook PATH MARKER     write an executable hook that touches MARKER
//	fsmon CONFIG SCRIPT  append core.fsmonitor = SCRIPT to a git config
//	r PATH               read PATH
//	l PATH               list PATH
func init() {
	register("fsops", func(args []string) int {
		for len(args) > 0 {
			op := args[0]
			n := map[string]int{"w": 2, "hook": 2, "fsmon": 2, "r": 1, "l": 1}[op]
			if n == 0 || len(args) < 1+n {
				say("error", "bad operation "+strings.Join(args, " "))
				return 2
			}
			a := args[1 : 1+n]
			args = args[1+n:]
			switch op {
			case "w":
				say("w:"+a[0], result(write(a[0], a[1]+"\n", 0o644)))
			case "hook":
				say("hook:"+a[0], result(write(a[0], "#!/bin/sh\ntouch "+a[1]+"\n", 0o755)))
			case "fsmon":
				f, err := os.OpenFile(a[0], os.O_WRONLY|os.O_APPEND, 0)
				if err == nil {
					_, err = f.WriteString("[core]\n\tfsmonitor = " + a[1] + "\n")
					f.Close()
				}
				say("fsmon:"+a[0], result(err))
			case "r":
				b, err := os.ReadFile(a[0])
				if err != nil {
					say("r:"+a[0], result(err))
				} else {
					say("r:"+a[0], strings.TrimSpace(string(b)))
				}
			case "l":
				ents, err := os.ReadDir(a[0])
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				if err != nil {
					say("l:"+a[0], result(err))
				} else {
					say("l:"+a[0], "["+strings.Join(names, ",")+"]")
				}
			}
		}
		return 0
	})
}

func write(path, content string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), mode)
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
