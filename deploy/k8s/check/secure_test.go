package check

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The secure overlay: ingest reaches Kafka over TLS with SASL, its password
// and CA files from the Secret stormradius-kafka; ingest and api reach
// ClickHouse over TLS on 9440, each as its own user (api's readonly), each
// with its own password file; api serves HTTPS from a mounted TLS Secret,
// its probes too; KEDA reads the lag with the mechanism ingest uses and
// the same Secret; the kubectl lines of the overlay's comment create every
// Secret, with every key, the build uses. checkDeployments checks the rest
// (flags, no secret in the open, every file in a mounted Secret).
func TestOverlaySecure(t *testing.T) {
	dir := filepath.Join(k8s, "overlays", "secure")
	r := build(t, dir)
	ws := checkDeployments(t, r)
	in, api := ws["ingest"], ws["api"]
	if in.value("kafka-sasl-mechanism") == "" || in.value("kafka-sasl-password-file") == "" || in.value("kafka-tls-ca") == "" {
		t.Errorf("ingest: want SASL with a password file and TLS with a CA, have %q %q %q",
			in.value("kafka-sasl-mechanism"), in.value("kafka-sasl-password-file"), in.value("kafka-tls-ca"))
	}
	ingestDB, apiDB := storeURL(t, in), storeURL(t, api)
	for _, u := range []string{ingestDB, apiDB} {
		if !regexp.MustCompile(`^clickhouse://[^:@/]+@[^/]+:9440/\w+\?`).MatchString(u) || !strings.Contains(u, "tls_ca=") ||
			!strings.Contains(u, "password_file=") {
			t.Errorf("store %s: want a user without a password, port 9440, tls_ca and password_file", u)
		}
	}
	user := func(u string) string { return u[len("clickhouse://"):strings.Index(u, "@")] }
	if user(ingestDB) == user(apiDB) {
		t.Errorf("ingest and api both use ClickHouse as %s: give api the readonly user", user(apiDB))
	}
	if strings.Contains(ingestDB, "@clickhouse:") {
		t.Errorf("ingest's store %s: the overlay's host did not replace the component's", ingestDB)
	}
	if api.value("http-tls-cert") == "" || api.value("http-tls-key") == "" {
		t.Errorf("api: no --http-tls-cert/--http-tls-key")
	}
	so := r.all("ScaledObject")
	if len(so) != 1 || len(so[0].Spec.Triggers) != 1 {
		t.Fatalf("want one ScaledObject with one trigger")
	}
	trig := so[0].Spec.Triggers[0]
	keda := map[string]string{"plain": "plaintext", "scram-sha-256": "scram_sha256", "scram-sha-512": "scram_sha512"}
	if got, want := trig.Metadata["sasl"], keda[strings.ToLower(in.value("kafka-sasl-mechanism"))]; got != want {
		t.Errorf("the kafka trigger's sasl is %q, ingest's mechanism %q (KEDA's name %q)", got, in.value("kafka-sasl-mechanism"), want)
	}
	if trig.Metadata["tls"] != "enable" || trig.Metadata["bootstrapServers"] != in.value("kafka-brokers") {
		t.Errorf("the kafka trigger: tls %q, brokers %q; ingest's TLS listener %q", trig.Metadata["tls"],
			trig.Metadata["bootstrapServers"], in.value("kafka-brokers"))
	}
	if trig.AuthenticationRef == nil || r.get("TriggerAuthentication", trig.AuthenticationRef.Name) == nil {
		t.Fatalf("the kafka trigger has no TriggerAuthentication in the build")
	}
	// KEDA's credentials are ingest's: the Secret keys ingest reads its
	// username from and mounts its password and CA from.
	ta := r.get("TriggerAuthentication", trig.AuthenticationRef.Name)
	used := secretKeys(r)
	for _, ref := range ta.Spec.SecretTargetRef {
		if !slices.Contains(used[ref.Name], ref.Key) {
			t.Errorf("KEDA's %s is %s/%s, a key ingest does not use (%v)", ref.Parameter, ref.Name, ref.Key, used)
		}
	}
	created := createdSecrets(t, filepath.Join(dir, "kustomization.yaml"))
	for name, keys := range used {
		if _, ok := created[name]; !ok {
			t.Errorf("the build uses Secret %s, which the overlay's kubectl lines do not create", name)
		}
		for _, k := range keys {
			if !slices.Contains(created[name], k) {
				t.Errorf("the build uses Secret %s key %s, which the overlay's kubectl lines do not create (they create %v)", name, k, created)
			}
		}
	}
}

// storeURL is a workload's store URL, which must be known (a ConfigMap's).
func storeURL(t *testing.T, w workload) string {
	t.Helper()
	u := w.value("store")
	if u == "" {
		t.Fatalf("%s: the store URL is not in the build", w.obj.Metadata.Name)
	}
	return u
}

// secretKeys returns the keys of each Secret the Deployments read: by
// secretKeyRef and by the items of Secret volumes, and the TriggerAuthentications'.
func secretKeys(r rendered) map[string][]string {
	used := map[string][]string{}
	add := func(name, key string) {
		if !slices.Contains(used[name], key) {
			used[name] = append(used[name], key)
		}
	}
	for _, d := range r.all("Deployment") {
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					add(e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
				}
			}
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret == nil {
				continue
			}
			if _, ok := used[v.Secret.SecretName]; !ok {
				used[v.Secret.SecretName] = nil // the whole Secret, when it has no items
			}
			for _, it := range v.Secret.Items {
				add(v.Secret.SecretName, it.Key)
			}
		}
	}
	for _, ta := range r.all("TriggerAuthentication") {
		for _, ref := range ta.Spec.SecretTargetRef {
			add(ref.Name, ref.Key)
		}
	}
	return used
}

var (
	createSecret = regexp.MustCompile(`create secret (generic|tls) ([a-z0-9-]+)`)
	fromKey      = regexp.MustCompile(`--from-(?:literal|file)=([A-Za-z0-9._-]+)=`)
)

// createdSecrets reads the kubectl create secret commands of a file's
// comments: each Secret's name and keys (a tls Secret: tls.crt, tls.key).
func createdSecrets(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "#")
		if m := createSecret.FindStringSubmatch(line); m != nil {
			cur = m[2]
			out[cur] = nil
			if m[1] == "tls" {
				out[cur] = []string{"tls.crt", "tls.key"}
			}
		}
		if cur == "" {
			continue
		}
		for _, m := range fromKey.FindAllStringSubmatch(line, -1) {
			out[cur] = append(out[cur], m[1])
		}
		if !strings.HasSuffix(strings.TrimSpace(line), `\`) {
			cur = ""
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no kubectl create secret line", path)
	}
	return out
}

// buildWith builds a kustomization written next to deploy/k8s's own
// files, in memory: kustomize refuses absolute paths, and the repository
// is not written to.
func buildWith(t *testing.T, kustomization string, files map[string]string) rendered {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(k8s, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(k8s, p)
		return mem.WriteFile(filepath.Join("/k8s", rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	files["kustomization.yaml"] = kustomization
	for name, text := range files {
		if err := mem.WriteFile(filepath.Join("/k8s/test", name), []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/k8s/test")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	return decodeRendered(t, m)
}

// Each component alone over the base builds and passes every check: a
// kustomization can take any of them.
func TestComponentsAlone(t *testing.T) {
	for _, c := range []string{"kafka-tls-sasl", "clickhouse-tls", "api-tls"} {
		t.Run(c, func(t *testing.T) {
			r := buildWith(t, "resources: [../base]\ncomponents: [../components/"+c+"]\n", map[string]string{})
			checkDeployments(t, r)
		})
	}
}

// The checks fail where they should: each case below breaks the secure
// overlay in one way, and exposure must say so.
func TestExposureRefuses(t *testing.T) {
	cmds := commands(t)
	for _, c := range []struct {
		name, patch string
		want        string
	}{
		{"token on api's command line", `
- target: {kind: Deployment, name: stormradius-api}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --api-token}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: s3cret}`,
			"--api-token on the command line is a secret"},
		{"store URL with its password in a ConfigMap", `
- target: {kind: ConfigMap, name: stormradius-ingest}
  patch: |-
    - {op: replace, path: /data/STORMRADIUS_STORE, value: "clickhouse://stormradius:pw@ch:9440/stormradius?secure=true"}`,
			"STORMRADIUS_STORE is a URL with a password in it, written in the manifest"},
		{"Kafka password as a plain value", `
- target: {kind: Deployment, name: stormradius-ingest}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: STORMRADIUS_KAFKA_SASL_PASSWORD, value: pw}}`,
			"STORMRADIUS_KAFKA_SASL_PASSWORD is a secret, written in the manifest"},
		{"password file outside the mounted Secret", `
- target: {kind: ConfigMap, name: stormradius-ingest}
  patch: |-
    - {op: replace, path: /data/STORMRADIUS_KAFKA_SASL_PASSWORD_FILE, value: /etc/kafka-password}`,
			"--kafka-sasl-password-file /etc/kafka-password is in no mounted volume"},
		{"key not mounted", `
- target: {kind: ConfigMap, name: stormradius-ingest}
  patch: |-
    - {op: replace, path: /data/STORMRADIUS_KAFKA_TLS_CA, value: /etc/stormradius/kafka/ca.pem}`,
			"Secret stormradius-kafka mounts no item at ca.pem"},
		{"unreadable without fsGroup", `
- target: {kind: Deployment, name: stormradius-ingest}
  patch: |-
    - {op: remove, path: /spec/template/spec/securityContext/fsGroup}`,
			"unreadable to the pod's user without fsGroup"},
		{"HTTP probes on HTTPS", `
- target: {kind: Deployment, name: stormradius-api}
  patch: |-
    - {op: remove, path: /spec/template/spec/containers/0/readinessProbe/httpGet/scheme}`,
			`the readiness probe asks over "", but --http serves "HTTPS"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := buildWith(t, "resources: [../overlays/secure]\npatches:"+c.patch+"\n", map[string]string{})
			var got []string
			for _, d := range r.all("Deployment") {
				w, err := workloadOf(cmds, r, d)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, exposure(w)...)
			}
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("exposure says %q, want %q", got, c.want)
			}
		})
	}
	// And the secure overlay as shipped: nothing.
	r := build(t, filepath.Join(k8s, "overlays", "secure"))
	for _, d := range r.all("Deployment") {
		w, err := workloadOf(cmds, r, d)
		if err != nil {
			t.Fatal(err)
		}
		if p := exposure(w); len(p) > 0 {
			t.Errorf("%s: %q", d.Metadata.Name, p)
		}
	}
}
