package check

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/stormradius/stormradius/deploy"
)

// loadCompose loads deploy/compose's files as docker compose does (its
// own loader: interpolation, merging, !reset and !override, validation)
// in the environment env.
func loadCompose(files []string, env []string) (*types.Project, error) {
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(k8s, "..", "compose", f))
	}
	opts, err := cli.NewProjectOptions(paths, cli.WithWorkingDirectory(filepath.Join(k8s, "..", "compose")),
		cli.WithEnv(env), cli.WithInterpolation(true), cli.WithResolvedPaths(true))
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

// The compose files as docker compose loads them: docker-compose.yml with
// nothing set (`docker compose up` as is) and its secret files present;
// secure.yml over it refused until its required variables are set, then
// with ingest and the collector waiting for nothing local, ingest's and
// api's secrets replaced by theirs, api still after ingest; in both, no
// stormradius service has a secret in the open, and every file one reads
// is one of its secrets (deploy/deploy_test.go checks the same on its own
// reading of the files).
func TestComposeLoads(t *testing.T) {
	cmds := commands(t)
	base, err := loadCompose([]string{"docker-compose.yml"}, nil)
	if err != nil {
		t.Fatalf("docker-compose.yml with nothing set: %v", err)
	}
	for _, s := range base.Secrets {
		if !fileExists(s.File) {
			t.Errorf("secret %s: file %s missing: docker compose up would fail", s.Name, s.File)
		}
	}
	checkComposeProject(t, cmds, base)

	files := []string{"docker-compose.yml", "secure.yml"}
	if _, err := loadCompose(files, nil); err == nil || !strings.Contains(err.Error(), "required variable") {
		t.Errorf("secure.yml without KAFKA_BROKERS, KAFKA_SASL_USERNAME, CLICKHOUSE_HOST: %v, want a required variable named", err)
	}
	sec, err := loadCompose(files, []string{"KAFKA_BROKERS=b-1.example:9096", "KAFKA_SASL_USERNAME=ingest", "CLICKHOUSE_HOST=ch.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ingest", "collector"} {
		if deps := sec.Services[name].DependsOn; len(deps) > 0 {
			t.Errorf("secure: %s waits for %v", name, slices.Sorted(maps.Keys(deps)))
		}
	}
	if _, ok := sec.Services["api"].DependsOn["ingest"]; !ok {
		t.Error("secure: api no longer waits for ingest (which migrates the store)")
	}
	want := map[string][]string{"ingest": {"clickhouse_ca", "clickhouse_ingest_password", "kafka_ca", "kafka_sasl_password"},
		"api": {"clickhouse_ca", "clickhouse_reader_password"}, "collector": {"kafka_ca", "kafka_sasl_password"}}
	for name, w := range want {
		var got []string
		for _, s := range sec.Services[name].Secrets {
			got = append(got, s.Source)
		}
		if slices.Sort(got); !slices.Equal(got, w) {
			t.Errorf("secure: %s mounts secrets %v, want %v", name, got, w)
		}
	}
	checkComposeProject(t, cmds, sec)
}

// checkComposeProject checks the stormradius services of a loaded project:
// their command lines and variables against the binaries, no secret in
// the open, every file they read one of their secrets.
func checkComposeProject(t *testing.T, cmds map[string]*deploy.Command, p *types.Project) {
	t.Helper()
	for name, s := range p.Services {
		if !strings.HasPrefix(s.Image, "stormradius:") {
			continue
		}
		cmd, rest, err := deploy.Resolve(cmds, s.Command)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		args, err := cmd.Check(rest)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		vars := map[string]*string{}
		for k, v := range s.Environment {
			vars[k] = v
		}
		env, err := cmd.CheckEnv(vars)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, p := range deploy.OpenSecrets(args, vars) {
			t.Errorf("%s: %s", name, p)
		}
		values := map[string]string{}
		for f := range cmd.Flags {
			values[f] = cmd.Value(args, env, f)
		}
		var targets []string
		for _, sec := range s.Secrets {
			targets = append(targets, sec.Target)
		}
		for what, f := range deploy.Files(values) {
			if !slices.Contains(targets, f) {
				t.Errorf("%s: %s reads %s, not one of its secrets %v", name, what, f, targets)
			}
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
