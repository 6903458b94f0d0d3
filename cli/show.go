package cli

import "fmt"

func runShow(env *Env, args []string) int {
	fs := newFlags(env, "show-effective-config", "CONFIG")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	path, ok := oneConfigArg(env, fs, pos)
	if !ok {
		return exitConfig
	}
	cfg, code := loadConfig(env, path)
	if cfg == nil {
		return code
	}
	out, err := cfg.Effective()
	if err != nil {
		fmt.Fprintf(env.Stderr, "Unexpected runtime error: %v\n", err)
		return exitRuntime
	}
	env.Stdout.Write(out)
	return exitOK
}
