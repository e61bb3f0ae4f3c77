package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// root is the repository, from this package's directory.
const root = ".."

var (
	buildOnce sync.Once
	buildDir  string // removed by TestMain
	built     map[string]*Command
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// commands builds the binaries as the image does — scripts/build.sh, in a
// copy of the build context that .dockerignore leaves — and reads the
// flags of every command from them.
func commands(t *testing.T) map[string]*Command {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the release binaries")
	}
	buildOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "stormradius-deploy")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = tmp
		ctxDir, bin := filepath.Join(tmp, "context"), filepath.Join(tmp, "bin")
		if buildErr = copyContext(root, ctxDir); buildErr != nil {
			return
		}
		if buildErr = Build(ctxDir, bin); buildErr != nil {
			buildErr = fmt.Errorf("the image's build in the context .dockerignore leaves: %w", buildErr)
			return
		}
		built, buildErr = Commands(bin)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// copyContext copies to dst the files of the repository (as a checkout
// has them: tracked, or new and not ignored) that .dockerignore leaves in
// the image's build context.
func copyContext(src, dst string) error {
	ignore, err := readDockerignore(filepath.Join(src, ".dockerignore"))
	if err != nil {
		return err
	}
	out, err := exec.Command("git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if ignore.excludes(f) {
			continue
		}
		info, err := os.Lstat(filepath.Join(src, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(src, f), filepath.Join(dst, f), info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// dockerignore is a .dockerignore's patterns, in order: the last that
// matches a path (or one of its parent directories) decides, "!" keeps.
type dockerignore []struct {
	re   *regexp.Regexp
	keep bool
}

func readDockerignore(path string) (dockerignore, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var d dockerignore
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		keep := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/")
		d = append(d, struct {
			re   *regexp.Regexp
			keep bool
		}{patternRegexp(filepath.ToSlash(filepath.Clean(p))), keep})
	}
	return d, sc.Err()
}

// patternRegexp turns a .dockerignore pattern (Go's filepath.Match, plus
// "**" for any number of directories) into a regexp of a whole path.
func patternRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func (d dockerignore) excludes(path string) bool {
	excluded := false
	for _, p := range d {
		// A pattern that matches a directory takes everything under it.
		for dir := path; dir != "." && dir != "/"; dir = filepath.Dir(dir) {
			if p.re.MatchString(dir) {
				excluded = !p.keep
				break
			}
		}
	}
	return excluded
}

func TestDockerignorePatterns(t *testing.T) {
	d := dockerignore{}
	for _, p := range []string{"**/testdata", "docs", "**/*.test", "data", "e2e", "!e2e/keep.go"} {
		keep := strings.HasPrefix(p, "!")
		d = append(d, struct {
			re   *regexp.Regexp
			keep bool
		}{patternRegexp(strings.TrimPrefix(p, "!")), keep})
	}
	for path, want := range map[string]bool{
		"testdata/sample.jsonl.gz":     true,
		"ingest/testdata/x/y.json":     true,
		"ingest/testdata.go":           false,
		"docs/PERFORMANCE.md":          true,
		"cmd/docs.go":                  false,
		"internal/app/app.test":        true,
		"app.test":                     true,
		"data/spans.db":                true,
		"store/data.go":                false,
		"e2e/collector/go.mod":         true,
		"e2e/keep.go":                  false,
		"cmd/stormradius/main.go":      false,
		"scripts/build.sh":             false,
		"internal/app/testdata_sub.go": false,
	} {
		if got := d.excludes(path); got != want {
			t.Errorf("%s excluded: %v, want %v", path, got, want)
		}
	}
}

// dockerfile is a Dockerfile's instructions, continuation lines joined,
// comments dropped.
type instruction struct{ op, args string }

func readDockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var ins []instruction
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		op, args, _ := strings.Cut(cur.String(), " ")
		ins = append(ins, instruction{strings.ToUpper(op), strings.TrimSpace(args)})
		cur.Reset()
	}
	return ins
}

// goVersion returns go.mod's go line.
func goVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// The image: built by scripts/build.sh with go.mod's Go, its final stage
// static, non-root, with the binaries on the PATH, a volume for the
// embedded store, and a health check and default command the binaries
// accept.
func TestDockerfile(t *testing.T) {
	cmds := commands(t)
	ins := readDockerfile(t)
	var stages [][]instruction
	args := map[string]string{}
	for _, in := range ins {
		switch {
		case in.op == "FROM":
			stages = append(stages, nil)
		case len(stages) == 0 && in.op == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
		if strings.Contains(in.args, "go build") {
			t.Errorf("Dockerfile runs go build itself (%s %s): build with scripts/build.sh, as CI does", in.op, in.args)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	if want := goVersion(t); args["GO_VERSION"] != want {
		t.Errorf("Dockerfile's GO_VERSION is %q, go.mod's go line %q", args["GO_VERSION"], want)
	}

	build, final := stages[0], stages[len(stages)-1]
	from := strings.Fields(build[0].args)
	if len(from) != 3 || from[0] != "golang:${GO_VERSION}" || strings.ToLower(from[1]) != "as" {
		t.Fatalf("build stage is FROM %s, want golang:${GO_VERSION} AS name", build[0].args)
	}
	stageName := from[2]
	var outDir string
	for _, in := range build {
		if in.op != "RUN" {
			continue
		}
		if m := regexp.MustCompile(`(?:^|\s)scripts/build\.sh (\S+)`).FindStringSubmatch(in.args); m != nil {
			outDir = m[1]
		}
	}
	if outDir == "" {
		t.Fatal("the build stage does not RUN scripts/build.sh")
	}

	base := final[0].args
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final stage is FROM %s, want distroless/static or scratch (static binaries, nothing else)", base)
	}
	var copied, user, volume, healthcheck, cmd string
	var exposed []string
	for _, in := range final[1:] {
		switch in.op {
		case "COPY":
			f := strings.Fields(in.args)
			if slices.Contains(f, "--from="+stageName) && strings.TrimSuffix(f[len(f)-2], "/") == outDir {
				copied = f[len(f)-1]
			}
		case "USER":
			user = in.args
		case "VOLUME":
			volume = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "HEALTHCHECK":
			_, healthcheck, _ = strings.Cut(in.args, "CMD ")
		case "CMD":
			cmd = in.args
		}
	}
	if copied != "/usr/local/bin/" && copied != "/usr/local/bin" {
		t.Errorf("the final stage copies %s/ (what scripts/build.sh built) to %q, want /usr/local/bin/ (on the PATH)", outDir, copied)
	}
	if user != "65532:65532" && user != "65532" {
		t.Errorf("USER %q, want the numeric 65532 (nonroot), so that runAsNonRoot can check it", user)
	}
	for _, p := range []string{"4317", "4318", "8080", "8081"} {
		if !slices.Contains(exposed, p) {
			t.Errorf("EXPOSE lacks %s (has %v)", p, exposed)
		}
	}

	// The default command serves the embedded store in the volume.
	c, rest, err := Resolve(cmds, execForm(t, "CMD", cmd))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Check(rest)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "stormradius serve" || volume == "" || got["data"] != volume {
		t.Errorf("CMD runs %s with --data %q, VOLUME %q: want serve's --data in the volume", c.Name, got["data"], volume)
	}
	// The health check asks serve's --http (its default, as CMD sets none).
	hc, rest, err := Resolve(cmds, execForm(t, "HEALTHCHECK", healthcheck))
	if err != nil {
		t.Fatal(err)
	}
	hargs, err := hc.Check(rest)
	if err != nil {
		t.Fatal(err)
	}
	if hc.Name != "stormradius healthcheck" {
		t.Fatalf("HEALTHCHECK runs %s", hc.Name)
	}
	checkProbe(t, "HEALTHCHECK", hc.Value(hargs, nil, "url"), c.Value(got, nil, "http"))
}

// execForm parses an instruction's JSON (exec) form.
func execForm(t *testing.T, what, s string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil {
		t.Fatalf("%s %s: want the exec form [\"binary\", ...] (the image has no shell): %v", what, s, err)
	}
	return argv
}

// checkProbe checks that a health check's URL asks /healthz or /readyz on
// the loopback port the service's --http listens on.
func checkProbe(t *testing.T, what, probe, httpAddr string) {
	t.Helper()
	u, err := url.Parse(probe)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_, port, _ := strings.Cut(httpAddr, ":")
	if u.Port() != port || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") {
		t.Errorf("%s asks %s, but the service listens on --http %q", what, probe, httpAddr)
	}
	if u.Path != "/healthz" && u.Path != "/readyz" {
		t.Errorf("%s asks %s: want /healthz or /readyz", what, u.Path)
	}
}

// CI builds through the same script as the image, and nothing else builds
// the release binaries there.
func TestCIBuildsWithScript(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*scripts/build\.sh `).Match(b) {
		t.Error(".ci/run does not run scripts/build.sh (the Dockerfile's build)")
	}
	if regexp.MustCompile(`(?m)^[^#]*\bgo build\b`).Match(b) {
		t.Error(".ci/run runs go build itself: build with scripts/build.sh, as the Dockerfile does")
	}
}

// compose is what deploy/compose/docker-compose.yml says (with the files
// given after it merged over it, as `docker compose -f … -f …` does),
// interpolated with an empty environment (every ${VAR:-default} at its
// default, a required ${VAR:?…} as "<VAR>").
type compose struct {
	Services map[string]*service `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Secrets     []string          `yaml:"secrets"`
	Deploy      struct {
		Replicas *int `yaml:"replicas"`
	} `yaml:"deploy"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

var composeVar = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate does compose's variable substitution with no variable set:
// ${VAR:-default} and ${VAR-default} become the default, ${VAR:?message}
// (which compose refuses to run without) "<VAR>", ${VAR} "", $$ $.
func interpolate(s string) string {
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sm := composeVar.FindStringSubmatch(m)
		if strings.HasSuffix(sm[2], "?") {
			return "<" + sm[1] + ">"
		}
		return sm[3]
	})
}

// readCompose reads deploy/compose/docker-compose.yml and the files of
// deploy/compose named after it merged over it, interpolated, and as
// written (raw: for what must not be written there).
func readCompose(t *testing.T, overrides ...string) (c, raw *compose, dir string) {
	t.Helper()
	dir = filepath.Join(root, "deploy", "compose")
	var merged any
	for _, name := range append([]string{"docker-compose.yml"}, overrides...) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		markTags(&doc)
		var m any
		if err := doc.Decode(&m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		merged = mergeCompose(merged, m)
	}
	decode := func(v any) *compose {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var c compose
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("the compose files, merged: %v", err)
		}
		return &c
	}
	return decode(interpolateAll(merged)), decode(merged), dir
}

// interpolateAll interpolates every string of a decoded YAML value.
func interpolateAll(v any) any {
	switch v := v.(type) {
	case string:
		return interpolate(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = interpolateAll(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = interpolateAll(e)
		}
		return out
	}
	return v
}

// Compose's merge tags: !reset drops what the files before set, !override
// replaces it. markTags moves them onto their keys ("depends_on!reset"),
// where the decoded value keeps them, for mergeCompose.
func markTags(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if tag := n.Content[i+1].Tag; tag == "!reset" || tag == "!override" {
				n.Content[i].Value += tag
				n.Content[i+1].Tag = ""
			}
		}
	}
	for _, c := range n.Content {
		markTags(c)
	}
}

// mergeCompose merges over onto base as compose merges files: mappings
// key by key, command and entrypoint replaced, other sequences (volumes,
// secrets, ports) appended, !reset and !override as they say.
func mergeCompose(base, over any) any {
	bm, ok1 := base.(map[string]any)
	om, ok2 := over.(map[string]any)
	if !ok1 || !ok2 {
		return over
	}
	out := maps.Clone(bm)
	for k, v := range om {
		if key, ok := strings.CutSuffix(k, "!reset"); ok {
			delete(out, key)
			continue
		}
		if key, ok := strings.CutSuffix(k, "!override"); ok {
			out[key] = v
			continue
		}
		bs, ok1 := out[k].([]any)
		ov, ok2 := v.([]any)
		if ok1 && ok2 && k != "command" && k != "entrypoint" {
			out[k] = append(slices.Clone(bs), ov...)
			continue
		}
		out[k] = mergeCompose(out[k], v)
	}
	return out
}

// run is a stormradius service of the compose file, checked: its command,
// the flags its command line and environment set.
type run struct {
	name     string
	svc      *service
	cmd      *Command
	args     map[string]string
	env      map[string]string
	vars     map[string]*string // its STORMRADIUS_* variables as the file gives them (nil: from the environment)
	replicas int
}

func (r run) value(flag string) string { return r.cmd.Value(r.args, r.env, flag) }

// The compose file: every stormradius command line, STORMRADIUS_* variable
// and health check is one the binaries take; the ingest instances share
// one consumer group and read only Kafka, from the topic the collector
// writes, with as many partitions; everything waits for what it needs; no
// secret is on a command line or written in the file (composeSecrets).
func TestCompose(t *testing.T) {
	cmds := commands(t)
	c, raw, dir := readCompose(t)
	for _, name := range []string{"clickhouse", "kafka", "kafka-init", "collector", "ingest", "api"} {
		if c.Services[name] == nil {
			t.Fatalf("docker-compose.yml has no service %q", name)
		}
	}
	runs := composeRuns(t, cmds, c, raw)
	if t.Failed() {
		return
	}
	in, replicas := checkIngestServices(t, runs, true)
	for _, r := range runs["api"] {
		if r.value("store") != in.value("store") {
			t.Errorf("%s reads --store %q, ingest writes %q", r.name, r.value("store"), in.value("store"))
		}
	}
	// The topic: made with at least as many partitions as instances.
	initCmd := c.Services["kafka-init"].Command
	topic, parts := argAfter(initCmd, "--topic"), argAfter(initCmd, "--partitions")
	if topic != in.value("kafka-topic") {
		t.Errorf("kafka-init makes topic %q, ingest reads %q", topic, in.value("kafka-topic"))
	}
	if n, err := strconv.Atoi(parts); err != nil || n < replicas {
		t.Errorf("kafka-init makes %q partitions for %d instances: an instance without a partition sits idle", parts, replicas)
	}
	if cond := c.Services["collector"].DependsOn["kafka-init"].Condition; cond != "service_completed_successfully" {
		t.Errorf("collector waits for kafka-init with %q, want service_completed_successfully", cond)
	}
	checkCollector(t, c.Services["collector"], dir, in)
	for _, p := range composeSecrets(c, raw, dir, runs, true) {
		t.Error(p)
	}
}

// secure.yml merged over the compose file: ingest reaches Kafka over TLS
// with SASL and ClickHouse over TLS (port 9440, a CA) with its own user,
// api with a readonly one, every password and CA from a mounted secret;
// the collector's kafka exporter speaks the same TLS and SASL as ingest;
// nothing waits for the local Kafka and ClickHouse, which it leaves down.
func TestComposeSecure(t *testing.T) {
	cmds := commands(t)
	c, raw, dir := readCompose(t, "secure.yml")
	runs := composeRuns(t, cmds, c, raw)
	if t.Failed() {
		return
	}
	in, _ := checkIngestServices(t, runs, false)
	if in.value("kafka-sasl-mechanism") == "" || in.value("kafka-sasl-password-file") == "" || in.value("kafka-tls-ca") == "" {
		t.Errorf("ingest: want SASL with a password file and TLS with a CA, have mechanism %q, password file %q, CA %q",
			in.value("kafka-sasl-mechanism"), in.value("kafka-sasl-password-file"), in.value("kafka-tls-ca"))
	}
	ingestDB, err := url.Parse(in.value("store"))
	if err != nil {
		t.Fatal(err)
	}
	if ingestDB.Port() != "9440" || ingestDB.Query().Get("tls_ca") == "" || ingestDB.Query().Get("password_file") == "" {
		t.Errorf("ingest's store %s: want ClickHouse's TLS port 9440, tls_ca and password_file", ingestDB)
	}
	for _, r := range runs["api"] {
		apiDB, err := url.Parse(r.value("store"))
		if err != nil {
			t.Fatal(err)
		}
		if apiDB.Host != ingestDB.Host || apiDB.Path != ingestDB.Path || apiDB.Query().Get("tls_ca") == "" {
			t.Errorf("%s reads %s, ingest writes %s: want the same database, over TLS", r.name, apiDB, ingestDB)
		}
		if apiDB.User.Username() == ingestDB.User.Username() ||
			apiDB.Query().Get("password_file") == ingestDB.Query().Get("password_file") {
			t.Errorf("%s reads as %s (%s), ingest writes as %s (%s): give api the readonly user", r.name, apiDB.User.Username(),
				apiDB.Query().Get("password_file"), ingestDB.User.Username(), ingestDB.Query().Get("password_file"))
		}
	}
	col := c.Services["collector"]
	for _, dep := range []string{"kafka-init", "kafka"} {
		if _, ok := col.DependsOn[dep]; ok {
			t.Errorf("collector still waits for the local %s", dep)
		}
	}
	checkCollector(t, col, dir, in)
	for _, p := range composeSecrets(c, raw, dir, runs, false) {
		t.Error(p)
	}
}

// composeRuns checks every stormradius service of a compose file — its
// image built here, its command line, STORMRADIUS_* variables and health
// check against the binaries — and returns them by command.
func composeRuns(t *testing.T, cmds map[string]*Command, c, raw *compose) map[string][]run {
	t.Helper()
	runs := map[string][]run{}
	for _, name := range slices.Sorted(maps.Keys(c.Services)) {
		s := c.Services[name]
		if img, tag, _ := strings.Cut(s.Image, ":"); tag == "" || tag == "latest" {
			t.Errorf("%s: image %q: pin a version", name, s.Image)
		} else if img != "stormradius" {
			continue
		}
		if s.Build == nil {
			t.Errorf("%s: image %s without build: compose would pull it", name, s.Image)
		}
		cmd, rest, err := Resolve(cmds, s.Command)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		args, err := cmd.Check(rest)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		// A value that is all ${VAR} comes from the environment compose
		// runs in, not from the file: unknown here, as a secret's.
		vars := map[string]*string{}
		for k, v := range s.Environment {
			if !wholeVar.MatchString(raw.Services[name].Environment[k]) {
				vars[k] = &v
			} else {
				vars[k] = nil
			}
		}
		env, err := cmd.CheckEnv(vars)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		r := run{name: name, svc: s, cmd: cmd, args: args, env: env, vars: vars, replicas: 1}
		if s.Deploy.Replicas != nil {
			r.replicas = *s.Deploy.Replicas
		}
		checkComposeHealth(t, cmds, r)
		if r.value("store") == "" && vars["STORMRADIUS_STORE"] == nil {
			t.Errorf("%s: no --store (nor STORMRADIUS_STORE)", name)
		}
		runs[cmd.Name] = append(runs[cmd.Name], r)
	}
	return runs
}

// wholeVar is a compose value that is one variable of the environment.
var wholeVar = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*(:?[-?][^}]*)?\}$`)

// checkComposeHealth checks a stormradius service's health check: the
// image's probe, in exec form, on the service's --http port.
func checkComposeHealth(t *testing.T, cmds map[string]*Command, r run) {
	t.Helper()
	s := r.svc
	if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" {
		t.Errorf("%s: want a healthcheck in exec form [CMD, stormradius, healthcheck, ...] (the image has no shell)", r.name)
	} else if hc, hrest, err := Resolve(cmds, s.Healthcheck.Test[1:]); err != nil {
		t.Errorf("%s: healthcheck: %v", r.name, err)
	} else if hargs, err := hc.Check(hrest); err != nil {
		t.Errorf("%s: healthcheck: %v", r.name, err)
	} else if hc.Name != "stormradius healthcheck" {
		t.Errorf("%s: healthcheck runs %s", r.name, hc.Name)
	} else {
		checkProbe(t, r.name+"'s healthcheck", hc.Value(hargs, nil, "url"), r.value("http"))
	}
}

// checkIngestServices checks the ingest instances — one group, Kafka only,
// waiting for the local ClickHouse and topic when local — and the api
// services, waiting for ingest to migrate the store. It returns an ingest
// service and the number of instances.
func checkIngestServices(t *testing.T, runs map[string][]run, local bool) (run, int) {
	t.Helper()
	ingest := runs["ingest"]
	if len(ingest) == 0 || len(runs["api"]) == 0 {
		t.Fatalf("the compose files run %v, want ingest and api", slices.Sorted(maps.Keys(runs)))
	}
	replicas := 0
	for _, r := range ingest {
		replicas += r.replicas
		for _, f := range []string{"kafka-brokers", "kafka-topic", "kafka-group", "kafka-encoding", "store"} {
			if a, b := r.value(f), ingest[0].value(f); a != b {
				t.Errorf("ingest services %s and %s differ in --%s: %q, %q", ingest[0].name, r.name, f, b, a)
			}
		}
		if r.value("otlp-grpc") != "off" || r.value("otlp-http") != "off" {
			t.Errorf("%s: OTLP receivers on (--otlp-grpc %q --otlp-http %q): with several instances spans must come through Kafka, by trace id",
				r.name, r.value("otlp-grpc"), r.value("otlp-http"))
		}
		if r.value("kafka-brokers") == "" {
			t.Errorf("%s: no --kafka-brokers", r.name)
		}
		for dep, want := range map[string]string{"clickhouse": "service_healthy", "kafka-init": "service_completed_successfully"} {
			cond, ok := r.svc.DependsOn[dep]
			if local && cond.Condition != want {
				t.Errorf("%s waits for %s with %q, want %s", r.name, dep, cond.Condition, want)
			}
			if !local && ok {
				t.Errorf("%s waits for the local %s, which it does not use", r.name, dep)
			}
		}
	}
	if replicas != 2 {
		t.Errorf("%d ingest instances, want 2", replicas)
	}
	in := ingest[0]
	for _, r := range runs["api"] {
		if cond := r.svc.DependsOn[in.name].Condition; cond != "service_healthy" {
			t.Errorf("%s waits for %s with %q, want service_healthy (ingest migrates the store)", r.name, in.name, cond)
		}
	}
	return in, replicas
}

// argAfter returns the argument after flag in argv.
func argAfter(argv []string, flag string) string {
	if i := slices.Index(argv, flag); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
}

var collectorVar = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)

// collectorKafka is the part of a collector config checkCollector reads.
type collectorKafka struct {
	Exporters map[string]struct {
		Brokers []string `yaml:"brokers"`
		Traces  struct {
			Topic    string `yaml:"topic"`
			Encoding string `yaml:"encoding"`
		} `yaml:"traces"`
		PartitionTracesByID bool `yaml:"partition_traces_by_id"`
		TLS                 *struct {
			CAFile   string `yaml:"ca_file"`
			CertFile string `yaml:"cert_file"`
			KeyFile  string `yaml:"key_file"`
		} `yaml:"tls"`
		Auth struct {
			SASL *struct {
				Mechanism string `yaml:"mechanism"`
				Username  string `yaml:"username"`
				Password  string `yaml:"password"`
			} `yaml:"sasl"`
		} `yaml:"auth"`
	} `yaml:"exporters"`
	Service struct {
		Pipelines map[string]struct {
			Exporters []string `yaml:"exporters"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
}

// readCollector reads the config files of the collector service — its
// --config flags, in order, merged as the collector merges them — as the
// service mounts them and with its environment.
func readCollector(t *testing.T, s *service, dir string) collectorKafka {
	t.Helper()
	var merged any
	for _, a := range s.Command {
		config, ok := strings.CutPrefix(a, "--config=")
		if !ok {
			continue
		}
		config = strings.TrimPrefix(config, "file:")
		var file string
		for _, v := range s.Volumes {
			if f := strings.Split(v, ":"); len(f) >= 2 && f[1] == config {
				file = filepath.Join(dir, f[0])
			}
		}
		if file == "" {
			t.Fatalf("collector: --config=%q is not a file the service mounts (%v)", config, s.Volumes)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := collectorVar.ReplaceAllStringFunc(string(b), func(m string) string {
			sm := collectorVar.FindStringSubmatch(m)
			if v, ok := s.Environment[sm[1]]; ok {
				return v
			}
			return sm[2]
		})
		var m any
		if err := yaml.Unmarshal([]byte(text), &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		merged = mergeCompose(merged, m) // maps merge key by key, as the collector's configs do
	}
	b, err := yaml.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	var cfg collectorKafka
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("collector config: %v", err)
	}
	return cfg
}

// checkCollector checks the collector's config: its traces pipeline ends
// in a kafka exporter keyed by trace id, writing what ingest reads, to the
// brokers it reads, with the TLS and SASL it uses — the exporter's
// password and CA from files of the service's secrets.
func checkCollector(t *testing.T, s *service, dir string, in run) {
	t.Helper()
	cfg := readCollector(t, s, dir)
	kafkas := 0
	for _, name := range cfg.Service.Pipelines["traces"].Exporters {
		if typ, _, _ := strings.Cut(name, "/"); typ != "kafka" {
			continue
		}
		kafkas++
		e := cfg.Exporters[name]
		if !e.PartitionTracesByID {
			t.Errorf("exporter %s lacks partition_traces_by_id: true (a trace's spans would reach several instances)", name)
		}
		if e.Traces.Topic != in.value("kafka-topic") {
			t.Errorf("exporter %s writes topic %q, ingest reads %q", name, e.Traces.Topic, in.value("kafka-topic"))
		}
		if e.Traces.Encoding != in.value("kafka-encoding") {
			t.Errorf("exporter %s writes %q, ingest reads %q", name, e.Traces.Encoding, in.value("kafka-encoding"))
		}
		if got := strings.Join(e.Brokers, ","); got != in.value("kafka-brokers") {
			t.Errorf("exporter %s writes to brokers %q, ingest reads %q", name, got, in.value("kafka-brokers"))
		}
		tlsOn := in.value("kafka-tls") == "true" || in.value("kafka-tls-ca") != "" || in.value("kafka-tls-cert") != ""
		if (e.TLS != nil) != tlsOn {
			t.Errorf("exporter %s: TLS %v, ingest's %v: both reach the same listener", name, e.TLS != nil, tlsOn)
		}
		if e.TLS != nil && e.TLS.CAFile != "" {
			if p := composeSecretFile("collector tls.ca_file", e.TLS.CAFile, s); p != "" {
				t.Error(p)
			}
		}
		mech, sasl := in.value("kafka-sasl-mechanism"), e.Auth.SASL
		switch {
		case (sasl != nil) != (mech != ""):
			t.Errorf("exporter %s: SASL %v, ingest's mechanism %q", name, sasl != nil, mech)
		case sasl != nil && !strings.EqualFold(sasl.Mechanism, mech):
			t.Errorf("exporter %s: SASL mechanism %s, ingest's %s", name, sasl.Mechanism, mech)
		case sasl != nil:
			f, ok := strings.CutPrefix(sasl.Password, "${file:")
			if !ok {
				t.Errorf("exporter %s: SASL password %q: want ${file:…} of a secret", name, sasl.Password)
			} else {
				if p := composeSecretFile("collector auth.sasl.password", strings.TrimSuffix(f, "}"), s); p != "" {
					t.Error(p)
				}
			}
		}
	}
	if kafkas != 1 {
		t.Errorf("the traces pipeline has %d kafka exporters, want 1", kafkas)
	}
}

// The checks reject what they should: a flag the binaries lack, a value a
// flag refuses, a variable that names no flag, a positional argument.
func TestCheckRefuses(t *testing.T) {
	cmds := commands(t)
	for _, c := range []struct {
		argv []string
		env  map[string]string
		err  string
	}{
		{[]string{"ingest", "--kafka-brokerz", "k:9092"}, nil, "ingest has no flag --kafka-brokerz"},
		{[]string{"ingest", "--retention", "a week"}, nil, `invalid value "a week" for flag -retention`},
		{[]string{"ingest", "--http"}, nil, "--http needs a value"},
		{[]string{"ingest", "serve"}, nil, `unexpected argument "serve"`},
		{[]string{"api", "--kafka-brokers", "k:9092"}, nil, "api has no flag --kafka-brokers"},
		{[]string{"stormradius", "serv"}, nil, `stormradius has no command "serv"`},
		{[]string{"curl", "http://x"}, nil, "not a command of the image"},
		{[]string{"api"}, map[string]string{"STORMRADIUS_INGEST_TOKEN": "t"}, "STORMRADIUS_INGEST_TOKEN sets --ingest-token, which api does not have"},
		{[]string{"ingest"}, map[string]string{"STORMRADIUS_MAX_INFLIGHT_SPANS": "many"}, `invalid value "many" for flag -max-inflight-spans`},
	} {
		cmd, rest, err := Resolve(cmds, c.argv)
		if err == nil {
			_, err = cmd.Check(rest)
		}
		if err == nil {
			env := map[string]*string{}
			for k, v := range c.env {
				env[k] = &v
			}
			_, err = cmd.CheckEnv(env)
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v %v: error %v, want one saying %q", c.argv, c.env, err, c.err)
		}
	}
	// And they accept what the binaries take, with the values they read.
	cmd, rest, err := Resolve(cmds, []string{"stormradius", "serve", "--data=/data", "--retention", "0"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cmd.Check(rest)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Value(got, nil, "data") != "/data" || cmd.Value(got, nil, "retention") != "0" || cmd.Value(got, nil, "http") != ":8080" {
		t.Errorf("serve --data=/data --retention 0: read %v, --http default %q", got, cmd.Value(got, nil, "http"))
	}
}

// docs/operations.md names only flags the binaries have (every inline
// `--flag` is one of some command's) and metrics the code registers.
func TestOperationsDoc(t *testing.T) {
	cmds := commands(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	flags := 0
	for _, m := range regexp.MustCompile("`--([a-z][a-z-]*)").FindAllStringSubmatch(doc, -1) {
		flags++
		found := false
		for _, c := range cmds {
			_, ok := c.Flags[m[1]]
			found = found || ok
		}
		if !found {
			t.Errorf("docs/operations.md names --%s, which no command has", m[1])
		}
	}
	// Metric names as the code registers them: whole literals, or the
	// Kafka receiver's "stormradius_kafka_" + name.
	var src strings.Builder
	for _, dir := range []string{"pipeline", "ingest", "web", "internal/app"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			src.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	code := src.String()
	kb, err := os.ReadFile(filepath.Join(root, "ingest", "kafka", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	kafkaCode := string(kb)
	// The ClickHouse users the document names (…://USER@host) are no metrics.
	users := map[string]bool{}
	for _, m := range regexp.MustCompile(`://([a-z_]+)@`).FindAllStringSubmatch(doc, -1) {
		users[m[1]] = true
	}
	metrics := 0
	for _, name := range regexp.MustCompile(`\bstormradius_[a-z_]+[a-z]\b`).FindAllString(doc, -1) {
		if users[name] {
			continue
		}
		metrics++
		suffix, kafka := strings.CutPrefix(name, "stormradius_kafka_")
		if !strings.Contains(code, `"`+name+`"`) && !(kafka && strings.Contains(kafkaCode, `counter("`+suffix+`"`)) {
			t.Errorf("docs/operations.md names metric %s, which the code does not register", name)
		}
	}
	if flags < 10 || metrics < 10 {
		t.Errorf("read %d flags and %d metrics from docs/operations.md: the patterns no longer match it", flags, metrics)
	}
}
