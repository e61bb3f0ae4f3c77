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
	"net/url"
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
// set one of its flags (or be one of EnvSecrets, for a command that reads
// it), and a value known here (nil: from a secret) must be one the flag
// takes. Other variables are ignored. It returns the flags they set, by
// name (values from secrets as ""; EnvSecrets as "kafka-sasl-password",
// "clickhouse-password").
func (c *Command) CheckEnv(env map[string]*string) (map[string]string, error) {
	got := map[string]string{}
	var args []string
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(env)) {
		name, ok := EnvFlag(k)
		if !ok {
			continue
		}
		if reads, ok := EnvSecrets[k]; ok {
			// A password without a flag: read by the commands with reads.
			if _, ok := c.Flags[reads]; !ok {
				errs = append(errs, fmt.Errorf("%s: %s is read with --%s, which %s does not have", c.Name, k, reads, c.Name))
				continue
			}
			got[name] = ""
			if v := env[k]; v != nil {
				got[name] = *v
			}
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

// EnvSecrets are the STORMRADIUS_* variables that set no flag: the
// passwords that have no flag at all, so that they never reach a command
// line (internal/app.KafkaPasswordEnv, internal/storeurl.PasswordEnv,
// ingest/chsource.PasswordEnv), each with the flag of the commands that
// read it.
var EnvSecrets = map[string]string{
	"STORMRADIUS_KAFKA_SASL_PASSWORD": "kafka-sasl-mechanism",
	"STORMRADIUS_CLICKHOUSE_PASSWORD": "store",
	"STORMRADIUS_SOURCE_PASSWORD":     "source",
}

// SecretFlag reports whether a flag's value is itself a secret — a token
// or a password, not the file that holds one.
func SecretFlag(name string) bool {
	return (strings.Contains(name, "token") || strings.Contains(name, "password") || strings.Contains(name, "secret")) &&
		!strings.HasSuffix(name, "-file")
}

// urlPassword matches a URL's user:password@, for URLs that do not parse
// (a password with a '/' or '#' not encoded).
var urlPassword = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://[^/@]*:[^/@]*@`)

// secretIn says why a setting's value is a secret ("" when it is not): a
// secret flag's value, or a URL holding a password (the store's).
func secretIn(name, value string) string {
	switch {
	case value == "":
		return ""
	case SecretFlag(name):
		return "a secret"
	case urlPassword.MatchString(value):
		return "a URL with a password in it"
	}
	if u, err := url.Parse(value); err == nil && u.Scheme != "" && u.Query().Has("password") {
		return "a URL with a password in it"
	}
	return ""
}

// OpenSecrets returns the secrets a container is given in the open: on its
// command line (args, as Check returns them: readable by every user of
// the host, in `ps` and the orchestrator's API), or in an environment
// variable whose value the manifest holds (env: name → value, nil when it
// comes from a secret store — a Kubernetes secretKeyRef, the host's
// environment). Secrets belong in files (a mounted Secret, a compose
// secret: --kafka-sasl-password-file, the store URL's password_file) or
// in variables a secret store fills.
func OpenSecrets(args map[string]string, env map[string]*string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if why := secretIn(name, args[name]); why != "" {
			out = append(out, fmt.Sprintf("--%s on the command line is %s: give it from a file or a secret", name, why))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		flag, ok := EnvFlag(k)
		if !ok || env[k] == nil {
			continue
		}
		if why := secretIn(flag, *env[k]); why != "" {
			out = append(out, fmt.Sprintf("%s is %s, written in the manifest: take it from a secret", k, why))
		}
	}
	return out
}

// storeFiles are the store URL's parameters that name files
// (internal/storeurl: ClickHouse's TLS and password file).
var storeFiles = []string{"tls_ca", "tls_cert", "tls_key", "password_file"}

// Files returns the files a command reads by its settings (flag → value,
// from its command line and environment): every flag that names a PEM
// file or a password file, and the store URL's file parameters, as
// "--flag" or "store tls_ca" → path.
func Files(values map[string]string) map[string]string {
	out := map[string]string{}
	for name, v := range values {
		if v == "" {
			continue
		}
		for _, suffix := range []string{"-file", "-ca", "-cert", "-key"} {
			if strings.HasSuffix(name, suffix) {
				out["--"+name] = v
			}
		}
	}
	if u, err := url.Parse(values["store"]); err == nil {
		q := u.Query()
		for _, p := range storeFiles {
			if f := q.Get(p); f != "" {
				out["store "+p] = f
			}
		}
	}
	return out
}
