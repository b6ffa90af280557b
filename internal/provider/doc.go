// Package provider streams one model turn from Anthropic's Messages API or an
// OpenAI-compatible Chat Completions endpoint, offering tsh as the only native
// tool, and falls back through a model's candidates (runtime.md W6).
//
// It speaks HTTP with net/http and a small SSE reader (package sse) rather than
// an SDK: no official Go SDK is in the module's allowed dependency set, we need
// exactly one streaming endpoint per provider, and owning the wire code lets us
// guarantee what an SDK does not promise — that cancellation stops emitting at
// once (X12), that nothing is retried once output began, and that the API key
// can never reach an error, a log line or an event (B4, D9).
//
// # Configuration
//
// $CTX_ROOT/providers.json is optional (absent: the two built-in providers
// with defaults); it must not be writable by group or others. Unknown fields
// are errors. Durations are Go durations.
//
//	{
//	  "providers": {
//	    "anthropic": {"max_tokens": 8192},
//	    "openai":    {"timeout": "5m"},
//	    "local":     {"type": "openai", "base_url": "http://127.0.0.1:8080/v1"},
//	    "vllm":      {"type": "openai", "base_url": "http://127.0.0.1:8000/v1", "api_key_env": "VLLM_API_KEY"}
//	  }
//	}
//
// A candidate "local/qwen2.5-7b" uses the entry "local" with model
// "qwen2.5-7b" (the name is cut at the first "/", so "vllm/org/model" works).
// Fields: type (anthropic|openai; implied for the entries named anthropic and
// openai), base_url, api_key_env, max_tokens (anthropic default 4096; openai
// default 0 = not sent), max_tokens_field (openai: max_completion_tokens or
// max_tokens), timeout (10m), idle_timeout (2m: wait for headers and between
// stream reads), attempts (3), backoff (1s), max_backoff (30s),
// max_retry_after (60s).
//
// Base URLs: Anthropic's has no /v1 (https://api.anthropic.com); an
// OpenAI-compatible one includes it (https://api.openai.com/v1), as the
// official SDKs read ANTHROPIC_BASE_URL and OPENAI_BASE_URL. Those two
// variables, from the daemon's environment, override the file for the entries
// named anthropic and openai.
//
// Keys: the daemon's ANTHROPIC_API_KEY / OPENAI_API_KEY (or api_key_env), else
// $CTX_ROOT/home/<uid>/secrets/<provider>: a regular file owned by the uid,
// mode 0600 (or 0400), holding the key (surrounding white space ignored). A
// file with any other mode, owner or type is refused and that provider's
// candidates fail with the reason. With no key, no credential header is sent.
package provider
