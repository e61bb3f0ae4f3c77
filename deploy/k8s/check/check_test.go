package check

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/stormradius/stormradius/deploy"
)

// The repository, and deploy/k8s, from this package's directory.
const (
	repo = "../../.."
	k8s  = ".."
)

var (
	buildOnce sync.Once
	buildDir  string
	built     map[string]*deploy.Command
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// commands builds the release binaries (scripts/build.sh) and reads every
// command's flags from them.
func commands(t *testing.T) map[string]*deploy.Command {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "stormradius-k8s"); buildErr != nil {
			return
		}
		if buildErr = deploy.Build(repo, buildDir); buildErr == nil {
			built, buildErr = deploy.Commands(buildDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// object is the part of a Kubernetes object these checks read.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		// Deployment
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// Service
		Ports []struct {
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		// PodDisruptionBudget, NetworkPolicy (podSelector)
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		Ingress []struct {
			Ports []struct {
				Port int `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
		// ScaledObject
		ScaleTargetRef struct {
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicaCount *int `yaml:"minReplicaCount"`
		MaxReplicaCount *int `yaml:"maxReplicaCount"`
		Triggers        []struct {
			Type              string            `yaml:"type"`
			Metadata          map[string]string `yaml:"metadata"`
			AuthenticationRef *struct {
				Name string `yaml:"name"`
			} `yaml:"authenticationRef"`
		} `yaml:"triggers"`
		// TriggerAuthentication
		SecretTargetRef []struct {
			Parameter string `yaml:"parameter"`
			Name      string `yaml:"name"`
			Key       string `yaml:"key"`
		} `yaml:"secretTargetRef"`
	} `yaml:"spec"`
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
		FSGroup      *int  `yaml:"fsGroup"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
	Volumes    []volume    `yaml:"volumes"`
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode *int   `yaml:"defaultMode"`
		Items       []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"secret"`
}

type probe struct {
	HTTPGet *struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	StartupProbe    *probe `yaml:"startupProbe"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

// rendered is what kustomize built from a directory.
type rendered []*object

// build runs kustomize (krusty, kubectl apply -k's engine) on dir.
func build(t *testing.T, dir string) rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return decodeRendered(t, m)
}

// decodeRendered decodes what kustomize built.
func decodeRendered(t *testing.T, m resmap.ResMap) rendered {
	t.Helper()
	b, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var out rendered
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		o := new(object)
		if err := dec.Decode(o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kustomize build: %v", err)
		}
		out = append(out, o)
	}
	return out
}

func (r rendered) get(kind, name string) *object {
	for _, o := range r {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	return nil
}

func (r rendered) all(kind string) []*object {
	var out []*object
	for _, o := range r {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// selects reports whether a selector's labels are all among labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// workload is a checked Deployment: the command its container runs and
// the flags its command line and environment set.
type workload struct {
	obj       *object
	c         *container
	cmd       *deploy.Command
	args, env map[string]string
	vars      map[string]*string // its STORMRADIUS_* variables (nil: from a Secret)
}

func (w workload) value(flag string) string { return w.cmd.Value(w.args, w.env, flag) }

// checkDeployments checks every Deployment of r: its command line and
// STORMRADIUS_* variables against the binaries' flags (ConfigMaps read as
// rendered, secrets' values unknown), probes on its --http port, the
// restricted security context, resource requests. It returns them by
// command ("ingest", "api").
func checkDeployments(t *testing.T, r rendered) map[string]workload {
	t.Helper()
	cmds := commands(t)
	out := map[string]workload{}
	for _, d := range r.all("Deployment") {
		name := d.Metadata.Name
		pod := d.Spec.Template.Spec
		if len(pod.Containers) != 1 {
			t.Errorf("%s: %d containers, want 1", name, len(pod.Containers))
			continue
		}
		c := &pod.Containers[0]
		if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
			t.Errorf("%s: selector %v does not select its pods %v", name, d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels)
		}
		w, err := workloadOf(cmds, r, d)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		cmd, args, env := w.cmd, w.args, w.env
		for _, p := range exposure(w) {
			t.Errorf("%s: %s", name, p)
		}
		if _, dup := out[cmd.Name]; dup {
			t.Errorf("two Deployments run %s", cmd.Name)
		}
		out[cmd.Name] = w

		if _, ok := env["store"]; !ok && args["store"] == "" {
			t.Errorf("%s: no --store nor STORMRADIUS_STORE", name)
		}
		// Probes: the --http port, by its name.
		var port int
		for _, p := range c.Ports {
			if p.Name == "http" {
				port = p.ContainerPort
			}
		}
		if _, p, _ := strings.Cut(w.value("http"), ":"); p == "" || p != strconv.Itoa(port) {
			t.Errorf("%s: --http %q, but its port named http is %d", name, w.value("http"), port)
		}
		for _, p := range []struct {
			what string
			p    *probe
			path string
		}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
			if p.p == nil || p.p.HTTPGet == nil {
				t.Errorf("%s: no %s probe", name, p.what)
				continue
			}
			if p.p.HTTPGet.Path != p.path || p.p.HTTPGet.Port != "http" {
				t.Errorf("%s: %s probe asks %s on port %s, want %s on http", name, p.what, p.p.HTTPGet.Path, p.p.HTTPGet.Port, p.path)
			}
		}
		// The restricted Pod Security Standard, as the image allows.
		sc := c.SecurityContext
		if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
			pod.SecurityContext.RunAsUser == nil || *pod.SecurityContext.RunAsUser != 65532 {
			t.Errorf("%s: want runAsNonRoot and runAsUser 65532 (the image's user)", name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
			*sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
			t.Errorf("%s: want readOnlyRootFilesystem, no privilege escalation, capabilities drop [ALL]", name)
		}
		for _, res := range []string{"cpu", "memory"} {
			if c.Resources.Requests[res] == "" || c.Resources.Limits["memory"] == "" {
				t.Errorf("%s: want requests of cpu and memory and a memory limit, have %v / %v", name, c.Resources.Requests, c.Resources.Limits)
				break
			}
		}
		// What serves it and what protects it from drains.
		pdb := false
		for _, o := range r.all("PodDisruptionBudget") {
			pdb = pdb || selects(o.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels)
		}
		if !pdb {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", name)
		}
		for _, np := range r.all("NetworkPolicy") {
			if !selects(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Metadata.Labels) {
				continue
			}
			open := false
			for _, in := range np.Spec.Ingress {
				for _, p := range in.Ports {
					open = open || p.Port == port
				}
			}
			if !open {
				t.Errorf("%s: NetworkPolicy %s closes its --http port %d (probes, /metrics)", name, np.Metadata.Name, port)
			}
		}
	}
	if out["ingest"].cmd == nil || out["api"].cmd == nil {
		t.Fatalf("the build runs %v, want ingest and api", slices.Sorted(maps.Keys(out)))
	}
	in := out["ingest"]
	if in.value("otlp-grpc") != "off" || in.value("otlp-http") != "off" || in.value("kafka-brokers") == "" {
		t.Errorf("ingest: want Kafka only (--otlp-grpc off --otlp-http off, brokers set), have %q %q %q",
			in.value("otlp-grpc"), in.value("otlp-http"), in.value("kafka-brokers"))
	}
	if in.c.StartupProbe == nil || in.c.StartupProbe.HTTPGet == nil {
		t.Error("ingest: no startup probe (recovery after a crash can take minutes before /healthz answers)")
	}
	return out
}

// workloadOf reads what a Deployment runs: its command line (the image's
// CMD is serve: a Deployment names its command) and STORMRADIUS_*
// variables, checked against the binaries' flags (ConfigMaps read as
// rendered, secrets' values unknown).
func workloadOf(cmds map[string]*deploy.Command, r rendered, d *object) (workload, error) {
	c := &d.Spec.Template.Spec.Containers[0]
	cmd, rest, err := deploy.Resolve(cmds, append(slices.Clone(c.Command), c.Args...))
	if err != nil {
		return workload{}, err
	}
	args, err := cmd.Check(rest)
	if err != nil {
		return workload{}, err
	}
	vars := map[string]*string{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm := r.get("ConfigMap", ef.ConfigMapRef.Name)
			if cm == nil {
				return workload{}, fmt.Errorf("envFrom ConfigMap %q is not in the build", ef.ConfigMapRef.Name)
			}
			for k, v := range cm.Data {
				vars[k] = &v
			}
		case ef.SecretRef != nil:
			return workload{}, fmt.Errorf("envFrom Secret %s: name each variable (secretKeyRef), so that every one is checked", ef.SecretRef.Name)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			vars[e.Name] = e.Value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			vars[e.Name] = nil
		}
	}
	env, err := cmd.CheckEnv(vars)
	if err != nil {
		return workload{}, err
	}
	return workload{obj: d, c: c, cmd: cmd, args: args, env: env, vars: vars}, nil
}

// exposure returns how a workload exposes a secret or fails to read one:
// a secret on its command line or written in the build (a literal value, a
// ConfigMap: deploy.OpenSecrets); a file it reads (a PEM, a password file,
// the store URL's tls_ca or password_file) that is not in a Secret mounted
// read-only, not one of the mounted keys, or not readable by its user; a
// certificate it serves mounted with subPath (never renewed); probes that
// speak HTTP to an HTTPS port, or HTTPS to an HTTP one.
func exposure(w workload) []string {
	out := deploy.OpenSecrets(w.args, w.vars)
	pod := w.obj.Spec.Template.Spec
	values := map[string]string{}
	for f := range w.cmd.Flags {
		values[f] = w.value(f)
	}
	files := deploy.Files(values)
	for _, what := range slices.Sorted(maps.Keys(files)) {
		if p := secretFile(pod, w.c, files[what]); p != "" {
			out = append(out, what+" "+p)
		}
		if strings.Contains(what, "tls-cert") || strings.Contains(what, "tls-key") {
			for _, m := range w.c.VolumeMounts {
				if m.SubPath != "" && strings.HasPrefix(files[what], m.MountPath) {
					out = append(out, fmt.Sprintf("%s %s is mounted with subPath: a renewed Secret never reaches it", what, files[what]))
				}
			}
		}
	}
	want := ""
	if values["http-tls-cert"] != "" {
		want = "HTTPS"
	}
	for what, p := range map[string]*probe{"startup": w.c.StartupProbe, "liveness": w.c.LivenessProbe, "readiness": w.c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			continue
		}
		if got := strings.ToUpper(p.HTTPGet.Scheme); got != want && !(want == "" && got == "HTTP") {
			out = append(out, fmt.Sprintf("the %s probe asks over %q, but --http serves %q", what, p.HTTPGet.Scheme, cmp.Or(want, "HTTP")))
		}
	}
	return out
}

// secretFile says what is wrong ("" if nothing) with a file a container
// reads: it must lie in a Secret volume mounted read-only, be one of the
// keys mounted, and be readable by the pod's user (the files are root's:
// other-readable, or group-readable with fsGroup).
func secretFile(pod podSpec, c *container, path string) string {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		var v *volume
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == m.Name {
				v = &pod.Volumes[i]
			}
		}
		switch {
		case v == nil || v.Secret == nil:
			return fmt.Sprintf("%s: volume %s is not a Secret", path, m.Name)
		case !m.ReadOnly:
			return fmt.Sprintf("%s: Secret %s is mounted writable", path, v.Secret.SecretName)
		}
		if len(v.Secret.Items) > 0 && !slices.ContainsFunc(v.Secret.Items, func(it struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		}) bool {
			return it.Path == rel
		}) {
			return fmt.Sprintf("%s: Secret %s mounts no item at %s", path, v.Secret.SecretName, rel)
		}
		mode := 0o644
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
		if mode&0o004 == 0 && (mode&0o040 == 0 || pod.SecurityContext.FSGroup == nil) {
			return fmt.Sprintf("%s: Secret %s's files are %#o, root's: unreadable to the pod's user without fsGroup", path, v.Secret.SecretName, mode)
		}
		return ""
	}
	return fmt.Sprintf("%s is in no mounted volume", path)
}

func TestBase(t *testing.T) {
	r := build(t, filepath.Join(k8s, "base"))
	ws := checkDeployments(t, r)
	if in := ws["ingest"].obj; in.Spec.Replicas == nil || *in.Spec.Replicas != 2 {
		t.Errorf("base: ingest replicas %v, want 2", in.Spec.Replicas)
	}
	for _, o := range r {
		if o.Metadata.Namespace != "" || o.Kind == "Namespace" {
			t.Errorf("base: %s %s sets a namespace: leave it to overlays", o.Kind, o.Metadata.Name)
		}
		if o.Kind == "ScaledObject" {
			t.Error("base: a ScaledObject needs KEDA's CRD: keep it in components/keda")
		}
	}
	if svc := r.get("Service", "stormradius-api"); svc == nil {
		t.Error("base: no Service stormradius-api")
	}
	// The kubectl line of the base's comment creates the Secret it reads.
	created := createdSecrets(t, filepath.Join(k8s, "base", "kustomization.yaml"))
	for name, keys := range secretKeys(r) {
		for _, k := range keys {
			if !slices.Contains(created[name], k) {
				t.Errorf("base: reads Secret %s key %s, which its kubectl line does not create (%v)", name, k, created)
			}
		}
	}
}

// The example overlay: KEDA scaling the ingest Deployment on the lag of the
// group it consumes as, everything in the namespace, the image renamed.
func TestOverlayExample(t *testing.T) {
	r := build(t, filepath.Join(k8s, "overlays", "example"))
	ws := checkDeployments(t, r)
	in := ws["ingest"]
	for _, o := range r {
		if o.Kind != "Namespace" && o.Metadata.Namespace != "stormradius" {
			t.Errorf("%s %s is in namespace %q, want stormradius", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
	}
	for _, w := range ws {
		if w.c.Image != "registry.example.com/stormradius:1.0.0" {
			t.Errorf("%s runs image %q, want the overlay's registry.example.com/stormradius:1.0.0", w.obj.Metadata.Name, w.c.Image)
		}
	}
	if in.obj.Spec.Replicas != nil {
		t.Errorf("ingest has replicas %d with KEDA scaling it: kubectl apply would reset KEDA's count", *in.obj.Spec.Replicas)
	}
	so := r.all("ScaledObject")
	if len(so) != 1 {
		t.Fatalf("%d ScaledObjects, want 1", len(so))
	}
	s := so[0]
	if s.Spec.ScaleTargetRef.Name != in.obj.Metadata.Name {
		t.Errorf("ScaledObject scales %q, the ingest Deployment is %q", s.Spec.ScaleTargetRef.Name, in.obj.Metadata.Name)
	}
	if s.Spec.MinReplicaCount == nil || s.Spec.MaxReplicaCount == nil || *s.Spec.MinReplicaCount < 1 || *s.Spec.MaxReplicaCount < *s.Spec.MinReplicaCount {
		t.Errorf("ScaledObject replicas %v..%v", s.Spec.MinReplicaCount, s.Spec.MaxReplicaCount)
	}
	if len(s.Spec.Triggers) != 1 || s.Spec.Triggers[0].Type != "kafka" {
		t.Fatalf("ScaledObject triggers %+v, want one kafka trigger", s.Spec.Triggers)
	}
	m := s.Spec.Triggers[0].Metadata
	for key, flag := range map[string]string{"bootstrapServers": "kafka-brokers", "consumerGroup": "kafka-group", "topic": "kafka-topic"} {
		if m[key] != in.value(flag) {
			t.Errorf("the kafka trigger's %s is %q, ingest's --%s %q", key, m[key], flag, in.value(flag))
		}
	}
	if m["lagThreshold"] == "" || m["allowIdleConsumers"] == "true" {
		t.Errorf("the kafka trigger: want a lagThreshold and no idle consumers beyond the partitions, have %v", m)
	}
	if m["offsetResetPolicy"] != "earliest" {
		t.Errorf("the kafka trigger's offsetResetPolicy %q: a new group of cmd/ingest starts at the log's start (earliest)", m["offsetResetPolicy"])
	}
	// The overlay's ConfigMap merge keeps the base's other settings.
	if in.value("kafka-group") == "" || in.env["retention"] != "168h" {
		t.Errorf("ingest's merged ConfigMap lost the base's settings: %v", in.env)
	}
	if api := ws["api"].obj; api.Spec.Replicas == nil || *api.Spec.Replicas != 3 {
		t.Errorf("api replicas %v, want the overlay's 3", api.Spec.Replicas)
	}
}
