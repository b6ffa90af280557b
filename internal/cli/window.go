package cli

import (
	"fmt"
	"regexp"
)

var windowRE = regexp.MustCompile(`^(auto|[1-9][0-9]{0,9})$`)

// checkWindowFlag validates --window at create time.
func checkWindowFlag(env *Env, v string, models []string) error {
	if !windowRE.MatchString(v) {
		return fmt.Errorf("window %q: want auto or a positive token count", v)
	}
	return nil
}

// windowValidator checks window and model together (W5) on set.
func windowValidator(env *Env, name string) func(string, []byte) error {
	return nil
}
