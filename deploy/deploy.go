// Package deploy holds the deployable artefacts — the container image's
// build (the repository's Dockerfile, scripts/build.sh), docker compose
// (deploy/compose), Kubernetes (deploy/k8s), collector configs, dashboards,
// rollout gates — and the checks that keep them true to the binaries they
// run: every command line and STORMRADIUS_* variable they give is checked
// against the flags the real binaries accept, read from the binaries
// themselves. deploy_test.go checks the image and compose;
// deploy/k8s/check (a module of its own: kustomize's API is large) builds
// the Kubernetes files with kustomize and checks what they render.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Binaries are the release binaries, as scripts/build.sh builds them and
// the image holds them (on its PATH).
var Binaries = []string{"stormradius", "ingest", "api"}

// Build builds the release binaries of the source tree at root into out
// with root's scripts/build.sh: the build the image and CI run.
func Build(root, out string) error {
	cmd := exec.Command("sh", filepath.Join(root, "scripts", "build.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/build.sh: %v\n%s", err, b)
	}
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(out, b)); err != nil {
			return fmt.Errorf("scripts/build.sh built no %s: %w", b, err)
		}
	}
	return nil
}

// Flag is one flag a command accepts, as its -h output lists it.
type Flag struct {
	Name    string
	Bool    bool   // takes no value (--name or --name=false)
	Default string // as -h shows it, unquoted; "" when it shows none
}

// Command is what a command line runs: a binary, and for stormradius its
// subcommand, with the flags it accepts.
type Command struct {
	Path  string   // the binary
	Args  []string // before the flags: the subcommand, if any
	Name  string   // "ingest", "stormradius serve"
	Flags map[string]Flag
}

// Commands reads the flags of every command of the binaries in dir: the
// stormradius subcommands its usage lists, ingest and api.
func Commands(dir string) (map[string]*Command, error) {
	cmds := map[string]*Command{}
	read := func(name, bin string, args ...string) error {
		c := &Command{Path: filepath.Join(dir, bin), Args: args, Name: name}
		out, _ := exec.Command(c.Path, append(slices.Clone(args), "-h")...).CombinedOutput()
		c.Flags = parseDefaults(string(out))
		if len(c.Flags) == 0 {
			return fmt.Errorf("%s -h lists no flag:\n%s", name, out)
		}
		cmds[name] = c
		return nil
	}
	for _, b := range []string{"ingest", "api"} {
		if err := read(b, b); err != nil {
			return nil, err
		}
	}
	out, _ := exec.Command(filepath.Join(dir, "stormradius"), "help").CombinedOutput()
	sub := regexp.MustCompile(`(?m)^  ([a-z]+) `).FindAllStringSubmatch(string(out), -1)
	if len(sub) == 0 {
		return nil, fmt.Errorf("stormradius help lists no command:\n%s", out)
	}
	for _, m := range sub {
		if err := read("stormradius "+m[1], "stormradius", m[1]); err != nil {
			return nil, err
		}
	}
	return cmds, nil
}

var (
	flagLine    = regexp.MustCompile(`^  -([A-Za-z0-9][\w.-]*)(?: (\S+))?$`)
	defaultText = regexp.MustCompile(`\(default (.*)\)$`)
)

// parseDefaults reads the flags of a flag.FlagSet's PrintDefaults output:
// "  -name type" (no type: a bool flag), then the usage, indented, ending
// in "(default D)" when the default is not the zero value.
func parseDefaults(help string) map[string]Flag {
	flags := map[string]Flag{}
	var last string
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		if m := flagLine.FindStringSubmatch(line); m != nil {
			last = m[1]
			flags[last] = Flag{Name: last, Bool: m[2] == ""}
			continue
		}
		if m := defaultText.FindStringSubmatch(line); m != nil && last != "" && strings.HasPrefix(line, "    \t") {
			f := flags[last]
			f.Default = strings.Trim(m[1], `"`)
			flags[last] = f
		}
	}
	return flags
}

// Resolve returns the command a container's command line runs — argv[0] a
// binary of the image (by name or path), then stormradius's subcommand —
// and the rest of the line, its flags.
func Resolve(cmds map[string]*Command, argv []string) (*Command, []string, error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("empty command line")
	}
	bin := filepath.Base(argv[0])
	if c, ok := cmds[bin]; ok {
		return c, argv[1:], nil
	}
	if bin == "stormradius" && len(argv) > 1 {
		if c, ok := cmds["stormradius "+argv[1]]; ok {
			return c, argv[2:], nil
		}
		return nil, nil, fmt.Errorf("%q: stormradius has no command %q", strings.Join(argv, " "), argv[1])
	}
	return nil, nil, fmt.Errorf("%q: not a command of the image (%s)", strings.Join(argv, " "), strings.Join(Binaries, ", "))
}

// Parse reads args as the command's flag set would: every flag one it
// has, a value after each that takes one, no positional argument. It
// returns the flags given, by name, with their values ("true" for a bare
// bool flag).
func (c *Command) Parse(args []string) (map[string]string, error) {
	got := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			name, ok = strings.CutPrefix(a, "-")
		}
		if !ok || name == "" || a == "--" {
			return nil, fmt.Errorf("%s: unexpected argument %q (the commands take flags only)", c.Name, a)
		}
		name, val, hasVal := strings.Cut(name, "=")
		f, ok := c.Flags[name]
		if !ok {
			return nil, fmt.Errorf("%s has no flag --%s", c.Name, name)
		}
		if !hasVal {
			if f.Bool {
				val = "true"
			} else if i+1 < len(args) {
				i++
				val = args[i]
			} else {
				return nil, fmt.Errorf("%s: --%s needs a value", c.Name, name)
			}
		}
		got[name] = val
	}
	return got, nil
}

// Check checks args (Parse), then has the binary parse them itself — args
// followed by -h, which stops it before it does anything — so that a
// value its flag refuses (a duration that is not one) is caught too.
func (c *Command) Check(args []string) (map[string]string, error) {
	got, err := c.Parse(args)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.Path, append(append(slices.Clone(c.Args), args...), "-h")...)
	cmd.Env = []string{} // no STORMRADIUS_* of the caller's
	out, _ := cmd.CombinedOutput()
	for _, bad := range []string{"invalid value", "invalid boolean", "flag provided but not defined", "flag needs an argument"} {
		if i := bytes.Index(out, []byte(bad)); i >= 0 {
			line, _, _ := strings.Cut(string(out[i:]), "\n")
			return nil, fmt.Errorf("%s %s: %s", c.Name, strings.Join(args, " "), line)
		}
	}
	return got, nil
}

// EnvFlag returns the flag a STORMRADIUS_* variable sets (internal/app's
// ApplyEnv: the name upper-cased, '-' as '_'), or false when name is not
// such a variable.
func EnvFlag(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "STORMRADIUS_")
	if !ok || rest == "" {
		return "", false
	}
	return strings.ReplaceAll(strings.ToLower(rest), "_", "-"), true
}

// CheckEnv checks the STORMRADIUS_* variables a command is given: each must
// set one of its flags, and a value known here (nil: from a secret) must
// be one the flag takes. Other variables are ignored. It returns the flags
// they set, by name (values from secrets as "").
func (c *Command) CheckEnv(env map[string]*string) (map[string]string, error) {
	got := map[string]string{}
	var args []string
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(env)) {
		name, ok := EnvFlag(k)
		if !ok {
			continue
		}
		if _, ok := c.Flags[name]; !ok {
			errs = append(errs, fmt.Errorf("%s: %s sets --%s, which %s does not have", c.Name, k, name, c.Name))
			continue
		}
		got[name] = ""
		if v := env[k]; v != nil {
			got[name] = *v
			args = append(args, "--"+name+"="+*v)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if _, err := c.Check(args); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	return got, nil
}

// Value returns the value of flag name a command runs with: from its
// command line (args, from Check), else its environment (env, from
// CheckEnv), else the flag's default.
func (c *Command) Value(args, env map[string]string, name string) string {
	if v, ok := args[name]; ok {
		return v
	}
	if v, ok := env[name]; ok {
		return v
	}
	return c.Flags[name].Default
}
