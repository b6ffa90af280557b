package ctxterm

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary a one-shot client (for the peer-uid test,
// run under another uid): it dials the socket named by the variable and
// prints the outcome.
const helperEnv = "CTXTERM_TEST_DIAL"

func TestMain(m *testing.M) {
	if sock := os.Getenv(helperEnv); sock != "" {
		c, err := Dial(sock, ModeWatch)
		if err != nil {
			fmt.Println("refused:", err)
			os.Exit(0)
		}
		c.Close()
		fmt.Println("accepted")
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
