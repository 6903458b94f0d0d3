package cli

import "fmt"

func runValidate(env *Env, args []string) int {
	fs := newFlags(env, "validate", "CONFIG")
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
	fmt.Fprintln(env.Stdout, "Configuration is valid.")
	printSinkHeader(env, cfg)
	printRoutingLines(env, cfg)
	return exitOK
}
