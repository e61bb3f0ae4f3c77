// Environment fallbacks for command-line flags: a flag
// not set on the command line takes the value of STORMRADIUS_<NAME>, with
// the name upper-cased and '-' turned into '_'.

package app

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// envPrefix is the prefix of every environment variable.
const envPrefix = "STORMRADIUS_"

// envName returns the environment variable of flag name.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ApplyEnv sets every flag of fs that was not given on the command line from
// its environment variable, if set. Call it after fs.Parse.
func ApplyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// Given reports whether flag name was set on the command line or by its
// environment variable.
func Given(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	if !given {
		_, given = os.LookupEnv(envName(name))
	}
	return given
}
