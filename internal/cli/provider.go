package cli

// ProviderCmd is `ctx provider`: providers.json and the owner's secrets
// files from the command line. ctx execs ctxd for it (ctxd links the
// provider code; the client stays free of net/http and TLS).
type ProviderCmd struct {
	Add  ProviderAddCmd  `cmd:"" help:"Declare a provider or change it, and store its key (read from the terminal without echo or from stdin, never from the command line) in CTX_ROOT/home/UID/secrets/NAME, mode 0600. Example: ctx provider add anthropic"`
	List ProviderListCmd `cmd:"" help:"List the providers: type, base URL and where each key comes from (never the key). Example: ctx provider list"`
	Test ProviderTestCmd `cmd:"" help:"Ask a provider for its model list with its key: ok, or what failed and the fix. Example: ctx provider test anthropic"`
}

// ProviderAddCmd is `ctx provider add`.
type ProviderAddCmd struct {
	Name    string `arg:"" help:"Provider name: anthropic, openai, or one of yours (a model local/qwen uses the provider local)."`
	Type    string `enum:",anthropic,openai" default:"" help:"Its protocol: anthropic or openai (an OpenAI-compatible server). Needed for a new name."`
	BaseURL string `name:"base-url" help:"Its address, e.g. http://127.0.0.1:11434/v1 (Ollama). Needed for a new name."`
	KeyEnv  string `name:"key-env" help:"Read the key from this variable of the daemon's environment instead of a secrets file."`
	NoKey   bool   `name:"no-key" help:"No key (a local server)."`
}

func (c *ProviderAddCmd) Run(env *Env) error {
	args := []string{"provider", "add", c.Name}
	if c.Type != "" {
		args = append(args, "--type", c.Type)
	}
	if c.BaseURL != "" {
		args = append(args, "--base-url", c.BaseURL)
	}
	if c.KeyEnv != "" {
		args = append(args, "--key-env", c.KeyEnv)
	}
	if c.NoKey {
		args = append(args, "--no-key")
	}
	return execDaemon(args...)
}

// ProviderListCmd is `ctx provider list`.
type ProviderListCmd struct{}

func (c *ProviderListCmd) Run(env *Env) error { return execDaemon("provider", "list") }

// ProviderTestCmd is `ctx provider test`.
type ProviderTestCmd struct {
	Name string `arg:"" help:"Provider name."`
}

func (c *ProviderTestCmd) Run(env *Env) error { return execDaemon("provider", "test", c.Name) }
