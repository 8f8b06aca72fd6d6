package setup

import "os"

// EnvOr returns the value of the environment variable key, or def when it is
// unset or empty. Flags use it for their defaults, so an explicit flag still
// wins over the environment.
func EnvOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
