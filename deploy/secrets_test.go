package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
)

// EnvSecrets names the variables internal/app and internal/storeurl read
// their passwords from.
func TestEnvSecretsAreTheCodes(t *testing.T) {
	for _, name := range []string{app.KafkaPasswordEnv, storeurl.PasswordEnv, chsource.PasswordEnv} {
		if _, ok := EnvSecrets[name]; !ok {
			t.Errorf("EnvSecrets lacks %s, a password variable the code reads", name)
		}
	}
	if len(EnvSecrets) != 3 {
		t.Errorf("EnvSecrets has %d variables, the code reads 3", len(EnvSecrets))
	}
}

// OpenSecrets finds a secret wherever it is given in the open, and
// nothing in settings that only name where secrets are.
func TestOpenSecrets(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		args map[string]string
		env  map[string]*string
		want []string // one problem naming each, in order
	}{
		{map[string]string{"api-token": "s3cret"}, nil, []string{"--api-token on the command line is a secret"}},
		{map[string]string{"ingest-token": "a,b"}, nil, []string{"--ingest-token"}},
		{map[string]string{"token": "t"}, nil, []string{"--token"}},
		{map[string]string{"store": "clickhouse://u:p@ch:9000/db"}, nil, []string{"--store on the command line is a URL with a password"}},
		{map[string]string{"store": "clickhouse://u:p@ss/w#rd@ch:9000/db"}, nil, []string{"--store"}}, // does not parse
		{map[string]string{"store": "https://ch:8443/db?username=u&password=p"}, nil, []string{"--store"}},
		{nil, map[string]*string{"STORMRADIUS_API_TOKEN": s("t")}, []string{"STORMRADIUS_API_TOKEN is a secret, written in the manifest"}},
		{nil, map[string]*string{"STORMRADIUS_KAFKA_SASL_PASSWORD": s("p")}, []string{"STORMRADIUS_KAFKA_SASL_PASSWORD"}},
		{nil, map[string]*string{"STORMRADIUS_CLICKHOUSE_PASSWORD": s("p")}, []string{"STORMRADIUS_CLICKHOUSE_PASSWORD"}},
		{nil, map[string]*string{"STORMRADIUS_STORE": s("clickhouse://u:p@ch:9000/db")}, []string{"STORMRADIUS_STORE is a URL with a password"}},
		// Where the secrets are, and secrets from a secret store: fine.
		{map[string]string{"kafka-sasl-password-file": "/run/secrets/k", "kafka-sasl-username": "ingest", "http-tls-key": "/tls/tls.key",
			"store": "clickhouse://u@ch:9440/db?secure=true&tls_ca=/ca.pem&password_file=/run/secrets/ch"}, nil, nil},
		{nil, map[string]*string{"STORMRADIUS_API_TOKEN": nil, "STORMRADIUS_STORE": nil, "STORMRADIUS_KAFKA_SASL_PASSWORD": nil,
			"STORMRADIUS_API_TOKEN_X": s("")}, nil},
	} {
		got := OpenSecrets(c.args, c.env)
		if len(got) != len(c.want) {
			t.Errorf("%v %v: %q, want %d problems", c.args, c.env, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%v %v: %q, want %q", c.args, c.env, got[i], w)
			}
		}
	}
}

// Files lists every file a command's settings name, the store URL's too.
func TestFiles(t *testing.T) {
	got := Files(map[string]string{"kafka-tls-ca": "/k/ca", "kafka-sasl-password-file": "/k/pw", "http-tls-cert": "/t/crt",
		"http-tls-key": "/t/key", "otlp-tls-client-ca": "/o/ca", "kafka-tls-server-name": "broker", "http": ":8080",
		"store": "clickhouse://u@ch:9440/db?tls_ca=/c/ca&tls_cert=/c/crt&tls_key=/c/key&password_file=/c/pw&dial_timeout=5s"})
	want := map[string]string{"--kafka-tls-ca": "/k/ca", "--kafka-sasl-password-file": "/k/pw", "--http-tls-cert": "/t/crt",
		"--http-tls-key": "/t/key", "--otlp-tls-client-ca": "/o/ca", "store tls_ca": "/c/ca", "store tls_cert": "/c/crt",
		"store tls_key": "/c/key", "store password_file": "/c/pw"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Files: %v\nwant %v", got, want)
	}
}

// secretVar is a variable whose name says it holds a secret.
var secretVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

func secretName(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "password") || strings.Contains(n, "token") || strings.Contains(n, "secret")
}

// composeSecrets returns where the compose files (c interpolated, raw as
// written) give a secret in the open: a command line, entrypoint or health
// check that expands a password or token variable or holds a secret file's
// content; a secret file's content anywhere in the files; a stormradius
// service's secret flag, or a STORMRADIUS_* secret written in the file
// (OpenSecrets); a file a stormradius service reads (Files) that is not one
// of its compose secrets; a secret whose file is missing (when mustExist:
// `docker compose up` needs it) or, when not, outside ./secrets/, where
// the operator's own files go, out of git.
func composeSecrets(c, raw *compose, dir string, runs map[string][]run, mustExist bool) []string {
	var out []string
	var values []string // the secrets' contents, where their files exist
	for _, name := range slices.Sorted(maps.Keys(c.Secrets)) {
		f := c.Secrets[name].File
		b, err := os.ReadFile(filepath.Join(dir, f))
		switch {
		case err == nil:
			if v := strings.TrimSpace(string(b)); len(v) >= 6 {
				values = append(values, v)
			}
		case mustExist:
			out = append(out, fmt.Sprintf("secret %s: %v", name, err))
		case !strings.HasPrefix(filepath.Clean(f), "secrets/"):
			out = append(out, fmt.Sprintf("secret %s: its default file %s is outside ./secrets/ (kept out of git)", name, f))
		}
	}
	text, _ := yaml.Marshal(raw)
	for _, v := range values {
		if strings.Contains(string(text), v) {
			out = append(out, "a secret file's content is written in the compose files")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Services)) {
		s, rs := c.Services[name], raw.Services[name]
		lines := slices.Concat(s.Entrypoint, s.Command, rs.Entrypoint, rs.Command)
		if s.Healthcheck != nil {
			lines = slices.Concat(lines, s.Healthcheck.Test, rs.Healthcheck.Test)
		}
		for _, l := range lines {
			for _, m := range secretVar.FindAllStringSubmatch(l, -1) {
				if secretName(m[1]) {
					out = append(out, fmt.Sprintf("%s: %q expands $%s on a command line: read it from a file in the process", name, l, m[1]))
				}
			}
			for _, v := range values {
				if strings.Contains(l, v) {
					out = append(out, fmt.Sprintf("%s: a secret file's content is on a command line", name))
				}
			}
		}
		for _, sec := range s.Secrets {
			if _, ok := c.Secrets[sec]; !ok {
				out = append(out, fmt.Sprintf("%s: secret %s is not defined", name, sec))
			}
		}
	}
	for _, rs := range runs {
		for _, r := range rs {
			for _, p := range OpenSecrets(r.args, r.vars) {
				out = append(out, r.name+": "+p)
			}
			values := map[string]string{}
			for _, f := range slices.Sorted(maps.Keys(r.cmd.Flags)) {
				values[f] = r.value(f)
			}
			files := Files(values)
			for _, what := range slices.Sorted(maps.Keys(files)) {
				if p := composeSecretFile(r.name+" "+what, files[what], r.svc); p != "" {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// composeSecretFile says what is wrong ("" if nothing) with a file a
// service reads: it must be one of the service's compose secrets, at
// /run/secrets/NAME.
func composeSecretFile(what, path string, s *service) string {
	name, ok := strings.CutPrefix(path, "/run/secrets/")
	if !ok || !slices.Contains(s.Secrets, name) {
		return fmt.Sprintf("%s reads %s, which is not one of its compose secrets %v (at /run/secrets/NAME)", what, path, s.Secrets)
	}
	return ""
}

// The compose checks fail where they should: a token on api's command
// line, a password written as a variable, a health check that expands the
// password, a file read from outside the service's secrets, the secret's
// content written in the file.
func TestComposeSecretsRefuse(t *testing.T) {
	cmds := commands(t)
	over := filepath.Join(t.TempDir(), "leaky.yml")
	dev, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "secrets", "clickhouse_password"))
	if err != nil {
		t.Fatal(err)
	}
	leaky := `services:
  api:
    command: ["api", "--http", ":8080", "--api-token", "t0ken-on-argv"]
  ingest:
    environment:
      STORMRADIUS_KAFKA_SASL_PASSWORD: written-here
      STORMRADIUS_KAFKA_SASL_MECHANISM: plain
      STORMRADIUS_KAFKA_SASL_PASSWORD_FILE: /etc/kafka-password
  clickhouse:
    healthcheck:
      test: ["CMD-SHELL", "clickhouse-client --password \"$$CLICKHOUSE_PASSWORD\" -q 'SELECT 1'"]
  kafka:
    environment:
      SOME_PASSWORD: ` + strings.TrimSpace(string(dev)) + "\n"
	if err := os.WriteFile(over, []byte(leaky), 0o600); err != nil {
		t.Fatal(err)
	}
	c, raw, dir := readCompose(t, over)
	runs := composeRuns(t, cmds, c, raw)
	got := strings.Join(composeSecrets(c, raw, dir, runs, true), "\n")
	for _, want := range []string{
		"api: --api-token on the command line is a secret",
		"ingest: STORMRADIUS_KAFKA_SASL_PASSWORD is a secret, written in the manifest",
		"ingest --kafka-sasl-password-file reads /etc/kafka-password, which is not one of its compose secrets",
		"clickhouse: \"clickhouse-client --password \\\"$CLICKHOUSE_PASSWORD\\\" -q 'SELECT 1'\" expands $CLICKHOUSE_PASSWORD",
		"a secret file's content is written in the compose files",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the checks do not say %q; they say:\n%s", want, got)
		}
	}
}

// shellWords splits a shell command line into words: quotes group and are
// removed, nothing is expanded ("$X" stays as written).
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

var (
	fence      = regexp.MustCompile("(?s)```sh\n(.*?)```")
	assignment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)
)

// docCommands returns the command lines of a document's sh blocks that run
// a binary of the image — continuation lines joined, comments dropped — as
// the variables set before the command (nil: a shell expansion, from the
// environment) and its words.
func docCommands(doc string) (out []struct {
	env  map[string]*string
	argv []string
	line string
}) {
	for _, block := range fence.FindAllStringSubmatch(doc, -1) {
		text := strings.ReplaceAll(block[1], "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			if i := strings.Index(line, " # "); i >= 0 {
				line = line[:i]
			}
			for _, part := range regexp.MustCompile(`&&|\|\||;|\|`).Split(line, -1) {
				words := shellWords(strings.TrimSpace(part))
				env := map[string]*string{}
				for len(words) > 0 {
					m := assignment.FindStringSubmatch(words[0])
					if m == nil {
						break
					}
					v := m[2]
					env[m[1]] = &v
					if strings.HasPrefix(v, "$") {
						env[m[1]] = nil
					}
					words = words[1:]
				}
				if len(words) > 0 && slices.Contains(Binaries, filepath.Base(words[0])) {
					out = append(out, struct {
						env  map[string]*string
						argv []string
						line string
					}{env, words, strings.TrimSpace(part)})
				}
			}
		}
	}
	return out
}

// docs/operations.md's examples run as written: every command line of its
// sh blocks that runs stormradius, ingest or api is one the binaries take
// (flags, values, STORMRADIUS_* variables before it), and none gives a
// secret in the open; every STORMRADIUS_* variable it names is a flag's,
// one of EnvSecrets, or one a deploy/collector config reads.
func TestOperationsDocExamples(t *testing.T) {
	cmds := commands(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	examples := docCommands(doc)
	for _, ex := range examples {
		cmd, rest, err := Resolve(cmds, ex.argv)
		if err == nil {
			var args map[string]string
			if args, err = cmd.Check(rest); err == nil {
				if _, err = cmd.CheckEnv(ex.env); err == nil {
					for _, p := range OpenSecrets(args, ex.env) {
						t.Errorf("docs/operations.md: %s: %s", ex.line, p)
					}
				}
			}
		}
		if err != nil {
			t.Errorf("docs/operations.md: %s: %v", ex.line, err)
		}
	}
	if len(examples) < 10 {
		t.Errorf("read %d command lines from docs/operations.md's sh blocks: the patterns no longer match it", len(examples))
	}
	collectors, err := filepath.Glob(filepath.Join(root, "deploy", "collector", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var collectorText strings.Builder
	for _, f := range collectors {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		collectorText.Write(b)
	}
	for _, name := range regexp.MustCompile(`\bSTORMRADIUS_[A-Z0-9_]*[A-Z0-9]\b`).FindAllString(doc, -1) {
		flag, _ := EnvFlag(name)
		known := strings.Contains(collectorText.String(), "${env:"+name)
		for _, c := range cmds {
			_, ok := c.Flags[flag]
			known = known || ok
		}
		if _, ok := EnvSecrets[name]; !ok && !known {
			t.Errorf("docs/operations.md names %s, which sets no flag, is no password variable and no collector config reads", name)
		}
	}
}
