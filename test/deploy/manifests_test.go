package deploy_test

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go"
	"go.yaml.in/yaml/v3"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

const (
	deploymentFile = "deploy/base/deployment.yaml"
	configMapFile  = "deploy/base/configmap.yaml"
	tollgateName   = "tollgate"        // Deployment and container
	configMapName  = "tollgate-config" // ConfigMap with config.yaml and the policies
	tollgateImage  = "ghcr.io/tollgate-mcp/tollgate:v0.1.0"
	configDir      = "/etc/tollgate" // docs/contract.md §4: the last config lookup location
	nonRootUID     = 65532           // distroless "nonroot", the Dockerfile's USER
)

// goRuntimeEnv are read by the Go runtime, not by Tollgate, and set from the container limits.
var goRuntimeEnv = map[string]string{"GOMEMLIMIT": "limits.memory", "GOMAXPROCS": "limits.cpu"}

// apiVersions is every kind deploy/ may use, with its apiVersion. A new kind is added here on
// purpose, so that its required fields get a thought.
var apiVersions = map[string]string{
	"Kustomization":       "kustomize.config.k8s.io/v1beta1",
	"Component":           "kustomize.config.k8s.io/v1alpha1",
	"Deployment":          "apps/v1",
	"Service":             "v1",
	"ConfigMap":           "v1",
	"Secret":              "v1",
	"PodDisruptionBudget": "policy/v1",
	"NetworkPolicy":       "networking.k8s.io/v1",
	"ServiceMonitor":      "monitoring.coreos.com/v1",
}

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestManifestHeaders(t *testing.T) {
	for _, m := range loadManifests(t) {
		t.Run(m.String(), func(t *testing.T) {
			if m.APIVersion == "" || m.Kind == "" {
				t.Fatalf("apiVersion %q, kind %q: both are required", m.APIVersion, m.Kind)
			}
			want, ok := apiVersions[m.Kind]
			if !ok {
				t.Fatalf("kind %s is not one deploy/ expects (add it to apiVersions)", m.Kind)
			}
			if m.APIVersion != want {
				t.Errorf("%s: apiVersion %q, want %q", m.Kind, m.APIVersion, want)
			}
			if m.Kind == "Kustomization" || m.Kind == "Component" {
				if path.Base(m.File) != "kustomization.yaml" {
					t.Errorf("%s belongs in a file named kustomization.yaml", m.Kind)
				}
				return
			}
			if !dns1123.MatchString(m.Metadata.Name) {
				t.Errorf("metadata.name %q: want a DNS-1123 label", m.Metadata.Name)
			}
		})
	}
}

// kustomizations maps each kustomization.yaml (repo-relative) to its parsed content.
func kustomizations(t *testing.T, ms []*manifest) map[string]kustomization {
	t.Helper()
	out := map[string]kustomization{}
	for _, m := range ms {
		if m.Kind == "Kustomization" || m.Kind == "Component" {
			var k kustomization
			m.decode(t, &k)
			out[m.File] = k
		}
	}
	return out
}

// patchFiles are the files kustomizations use as patches: partial objects, not full ones.
func patchFiles(t *testing.T, ms []*manifest) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for file, k := range kustomizations(t, ms) {
		dir := path.Dir(file)
		for _, p := range k.Patches {
			if p.Path != "" {
				out[path.Join(dir, p.Path)] = true
			}
		}
		for _, p := range k.PatchesStrategicMerge {
			out[path.Join(dir, p)] = true
		}
	}
	return out
}

func TestKustomizationsListExistingFiles(t *testing.T) {
	root := repoRoot(t)
	ms := loadManifests(t)
	kinds := map[string]string{} // kustomization dir → Kustomization | Component
	for _, m := range ms {
		if m.Kind == "Kustomization" || m.Kind == "Component" {
			kinds[path.Dir(m.File)] = m.Kind
		}
	}
	used := map[string]bool{}
	for file, k := range kustomizations(t, ms) {
		dir := path.Dir(file)
		check := func(field, ref string, wantKind string) {
			p := path.Join(dir, ref)
			fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
			switch {
			case err != nil:
				t.Errorf("%s: %s %q does not exist", file, field, ref)
			case fi.IsDir():
				got, ok := kinds[p]
				if !ok {
					t.Errorf("%s: %s %q is a directory without kustomization.yaml", file, field, ref)
				} else if wantKind != "" && got != wantKind {
					t.Errorf("%s: %s %q is a %s, want a %s", file, field, ref, got, wantKind)
				}
			default:
				used[p] = true
			}
		}
		for _, r := range k.Resources {
			check("resource", r, "Kustomization")
		}
		for _, c := range k.Components {
			check("component", c, "Component")
		}
		for _, p := range k.Patches {
			if p.Path != "" {
				check("patch", p.Path, "")
			}
		}
		for _, p := range k.PatchesStrategicMerge {
			check("patchesStrategicMerge", p, "")
		}
	}
	// The other direction: a manifest no kustomization lists is never deployed and rots.
	files := map[string]bool{}
	for _, m := range ms {
		files[m.File] = true
	}
	for f := range files {
		if path.Base(f) != "kustomization.yaml" && !used[f] {
			t.Errorf("%s is not listed by any kustomization.yaml", f)
		}
	}
}

// fullDeployments are the Deployments that are whole objects (not overlay patches).
func fullDeployments(t *testing.T, ms []*manifest) map[*manifest]*deployment {
	t.Helper()
	patches := patchFiles(t, ms)
	out := map[*manifest]*deployment{}
	for _, m := range byKind(ms, "Deployment") {
		if patches[m.File] {
			continue
		}
		d := &deployment{}
		m.decode(t, d)
		out[m] = d
	}
	if len(out) == 0 {
		t.Fatal("no Deployment found")
	}
	return out
}

func TestDeploymentsAreHardened(t *testing.T) {
	ms := loadManifests(t)
	for m, d := range fullDeployments(t, ms) {
		t.Run(m.String(), func(t *testing.T) {
			pod := &d.Spec.Template.Spec
			if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
				t.Errorf("selector %v does not match the pod labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels)
			}
			if !isFalse(pod.EnableServiceLinks) {
				t.Error("enableServiceLinks must be false: service links inject *_PORT/*_SERVICE_HOST variables (TOLLGATE_PORT for the tollgate Service)")
			}
			if !isFalse(pod.AutomountServiceAccountToken) {
				t.Error("automountServiceAccountToken must be false: nothing here talks to the Kubernetes API")
			}
			psc := pod.SecurityContext
			if psc == nil {
				psc = &securityContext{}
			}
			volumes := map[string]bool{}
			for _, v := range pod.Volumes {
				volumes[v.Name] = true
			}
			if len(pod.Containers) == 0 {
				t.Fatal("no containers")
			}
			for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
				checkContainer(t, &c, psc, volumes)
			}
		})
	}
}

func checkContainer(t *testing.T, c *container, pod *securityContext, volumes map[string]bool) {
	t.Helper()
	if c.Image == "" || !strings.Contains(c.Image, ":") {
		t.Errorf("container %s: image %q: want an image with a tag", c.Name, c.Image)
	}
	for _, res := range []string{"cpu", "memory"} {
		if c.Resources.Requests[res] == "" || c.Resources.Limits[res] == "" {
			t.Errorf("container %s: resources need requests and limits for %s", c.Name, res)
		}
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("container %s: no securityContext", c.Name)
		sc = &securityContext{}
	}
	if !isTrue(sc.RunAsNonRoot) && !isTrue(pod.RunAsNonRoot) {
		t.Errorf("container %s: runAsNonRoot must be true", c.Name)
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		t.Errorf("container %s: readOnlyRootFilesystem must be true", c.Name)
	}
	if !isFalse(sc.AllowPrivilegeEscalation) {
		t.Errorf("container %s: allowPrivilegeEscalation must be false", c.Name)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container %s: capabilities.drop must contain ALL", c.Name)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = pod.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != "RuntimeDefault" {
		t.Errorf("container %s: seccompProfile must be RuntimeDefault", c.Name)
	}
	// A container that serves ports needs probes on them; one without ports (the MCP server,
	// loopback only) is covered by Tollgate's /readyz, which requires the upstream.
	if len(c.Ports) > 0 {
		for name, p := range map[string]*probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
			if p == nil {
				t.Errorf("container %s: %s is required for a container with ports", c.Name, name)
				continue
			}
			if _, ok := probePort(c, p); !ok && p.Exec == nil {
				t.Errorf("container %s: %s does not target one of its ports", c.Name, name)
			}
		}
	}
	for _, vm := range c.VolumeMounts {
		if !volumes[vm.Name] {
			t.Errorf("container %s: volumeMount %s has no volume", c.Name, vm.Name)
		}
	}
}

// probePort resolves a probe's port (name or number) against the container's ports.
func probePort(c *container, p *probe) (int, bool) {
	var port any
	switch {
	case p.HTTPGet != nil:
		port = p.HTTPGet.Port
	case p.TCPSocket != nil:
		port = p.TCPSocket.Port
	default:
		return 0, false
	}
	switch v := port.(type) {
	case string:
		return c.portNamed(v)
	case int:
		for _, cp := range c.Ports {
			if cp.ContainerPort == v {
				return v, true
			}
		}
	}
	return 0, false
}

// baseTollgate is the tollgate container of the base Deployment.
func baseTollgate(t *testing.T, ms []*manifest) (*deployment, *container) {
	t.Helper()
	var d deployment
	find(t, ms, deploymentFile, "Deployment", tollgateName).decode(t, &d)
	return &d, containerNamed(t, &d.Spec.Template.Spec, tollgateName)
}

func TestTollgateContainerMatchesBinary(t *testing.T) {
	ms := loadManifests(t)
	d, c := baseTollgate(t, ms)

	if c.Image != tollgateImage {
		t.Errorf("image %q, want %q", c.Image, tollgateImage)
	}
	if want := []string{"run", "--config", configDir + "/config.yaml"}; !slices.Equal(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}

	ports := []struct {
		name, env string
		port      int
	}{
		{"mcp", "TOLLGATE_LISTEN", config.DefaultListenPort},
		{"admin", "TOLLGATE_ADMIN_LISTEN", config.DefaultAdminPort},
	}
	for _, p := range ports {
		got, ok := c.portNamed(p.name)
		if !ok || got != p.port {
			t.Errorf("port %s = %d, want %d (the binary's default)", p.name, got, p.port)
		}
		// Loopback is the binary's default; the kubelet and Services need every interface.
		e, _ := c.env(p.env)
		if want := "0.0.0.0:" + strconv.Itoa(p.port); e.Value != want {
			t.Errorf("env %s = %q, want %q", p.env, e.Value, want)
		}
	}

	probes := []struct {
		name string
		p    *probe
		path string
	}{
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
		{"startupProbe", c.StartupProbe, "/healthz"},
	}
	for _, pr := range probes {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Errorf("%s: want httpGet %s on the admin port", pr.name, pr.path)
			continue
		}
		port, _ := probePort(c, pr.p)
		if pr.p.HTTPGet.Path != pr.path || port != config.DefaultAdminPort {
			t.Errorf("%s: GET %s on port %d, want GET %s on %d", pr.name, pr.p.HTTPGet.Path, port, pr.path, config.DefaultAdminPort)
		}
	}

	// The upstream is the MCP server beside Tollgate, on loopback only.
	up, _ := c.env("TOLLGATE_UPSTREAM_URL")
	if u, err := url.Parse(up.Value); err != nil || u.Hostname() != "127.0.0.1" {
		t.Errorf("TOLLGATE_UPSTREAM_URL %q: want a loopback URL", up.Value)
	}

	uid := c.SecurityContext.RunAsUser
	if uid == nil && d.Spec.Template.Spec.SecurityContext != nil {
		uid = d.Spec.Template.Spec.SecurityContext.RunAsUser
	}
	if uid == nil || *uid != nonRootUID {
		t.Errorf("runAsUser: want %d (the image's user)", nonRootUID)
	}

	for name, res := range goRuntimeEnv {
		e, ok := c.env(name)
		if !ok || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != res {
			t.Errorf("env %s: want valueFrom.resourceFieldRef.resource %s", name, res)
		}
	}

	var mount *volumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == configDir {
			mount = &c.VolumeMounts[i]
		}
	}
	switch {
	case mount == nil:
		t.Fatalf("no volume mounted at %s", configDir)
	case mount.SubPath != "":
		// A subPath mount never sees ConfigMap updates, so hot reload would silently stop.
		t.Errorf("%s is mounted with subPath %q: ConfigMap updates would not reach the pod", configDir, mount.SubPath)
	case !mount.ReadOnly:
		t.Errorf("%s must be mounted readOnly", configDir)
	}
	if v := configVolume(t, &d.Spec.Template.Spec); v.ConfigMap.Name != configMapName {
		t.Errorf("volume at %s is ConfigMap %q, want %q", configDir, v.ConfigMap.Name, configMapName)
	}
}

// configVolume is the ConfigMap volume mounted at configDir in the tollgate container.
func configVolume(t *testing.T, pod *podSpec) *volume {
	t.Helper()
	c := containerNamed(t, pod, tollgateName)
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != configDir {
			continue
		}
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == vm.Name && pod.Volumes[i].ConfigMap != nil {
				return &pod.Volumes[i]
			}
		}
	}
	t.Fatalf("no ConfigMap volume mounted at %s", configDir)
	return nil
}

// variant is the tollgate container and its config as one kustomize target renders them.
type variant struct {
	name    string // "base" or the overlay directory
	env     []envVar
	data    map[string]string // ConfigMap tollgate-config
	mounts  []volumeMount     // the tollgate container's
	volumes []volume          // the pod's
}

// variants merges each overlay's Deployment and ConfigMap patches into the base, the way a
// strategic merge patch does for env (by name) and data (by key).
func variants(t *testing.T, ms []*manifest) []variant {
	t.Helper()
	d, c := baseTollgate(t, ms)
	var cm configMap
	find(t, ms, configMapFile, "ConfigMap", configMapName).decode(t, &cm)
	pod := d.Spec.Template.Spec
	out := []variant{{name: "base", env: c.Env, data: cm.Data, mounts: c.VolumeMounts, volumes: pod.Volumes}}

	byFile := map[string][]*manifest{}
	for _, m := range ms {
		byFile[m.File] = append(byFile[m.File], m)
	}
	for file, k := range kustomizations(t, ms) {
		dir := path.Dir(file)
		if !strings.HasPrefix(dir, "deploy/overlays/") {
			continue
		}
		v := variant{name: strings.TrimPrefix(dir, "deploy/"), env: slices.Clone(c.Env), data: maps(cm.Data),
			mounts: slices.Clone(c.VolumeMounts), volumes: slices.Clone(pod.Volumes)}
		var refs []string
		for _, p := range k.Patches {
			refs = append(refs, p.Path)
		}
		refs = append(refs, k.PatchesStrategicMerge...)
		for _, ref := range refs {
			for _, m := range byFile[path.Join(dir, ref)] {
				switch {
				case m.Kind == "Deployment" && m.Metadata.Name == tollgateName:
					var d deployment
					m.decode(t, &d)
					for _, pc := range d.Spec.Template.Spec.Containers {
						if pc.Name == tollgateName {
							v.env = mergeEnv(v.env, pc.Env)
							v.mounts = mergeByName(v.mounts, pc.VolumeMounts, func(m volumeMount) string { return m.Name })
						}
					}
					v.volumes = mergeByName(v.volumes, d.Spec.Template.Spec.Volumes, func(v volume) string { return v.Name })
				case m.Kind == "ConfigMap" && m.Metadata.Name == configMapName:
					var p configMap
					m.decode(t, &p)
					for k, val := range p.Data {
						v.data[k] = val
					}
				}
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b variant) int { return strings.Compare(a.name, b.name) })
	return out
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// mergeByName merges a strategic merge patch's list into base by name (volumes, mounts).
// A patch entry deleting its name ($patch: delete) decodes with nothing but the name set and
// is dropped by the callers' checks, which look entries up by what they mount.
func mergeByName[T any](base, patch []T, name func(T) string) []T {
	out := slices.Clone(base)
	for _, p := range patch {
		i := slices.IndexFunc(out, func(e T) bool { return name(e) == name(p) })
		if i >= 0 {
			out[i] = p
		} else {
			out = append(out, p)
		}
	}
	return out
}

func mergeEnv(base, patch []envVar) []envVar {
	out := slices.Clone(base)
	for _, p := range patch {
		i := slices.IndexFunc(out, func(e envVar) bool { return e.Name == p.Name })
		if i >= 0 {
			out[i] = p
		} else {
			out = append(out, p)
		}
	}
	return out
}

// envRef matches ${VAR} and ${VAR:-default} as config expansion reads them.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}`)

// rawConfig is the part of config.yaml read without the config package, so that a bug there
// cannot hide a mismatch here.
type rawConfig struct {
	Approvers []struct {
		Name      string `yaml:"name"`
		TokenEnv  string `yaml:"token_env"`
		TokenFile string `yaml:"token_file"`
	} `yaml:"approvers"`
}

func TestTollgateEnvIsKnown(t *testing.T) {
	ms := loadManifests(t)
	known := map[string]bool{}
	for _, e := range config.EnvVars {
		known[e.Name] = true
	}
	secrets := map[string]map[string]bool{} // Secret name → keys
	for _, m := range byKind(ms, "Secret") {
		var s secret
		m.decode(t, &s)
		if secrets[m.Metadata.Name] == nil {
			secrets[m.Metadata.Name] = map[string]bool{}
		}
		for k := range s.StringData {
			secrets[m.Metadata.Name][k] = true
		}
		for k := range s.Data {
			secrets[m.Metadata.Name][k] = true
		}
	}

	for _, v := range variants(t, ms) {
		t.Run(v.name, func(t *testing.T) {
			data := v.data["config.yaml"]
			var raw rawConfig
			if err := yaml.Unmarshal([]byte(data), &raw); err != nil {
				t.Fatalf("config.yaml: %v", err)
			}
			tokens := map[string]bool{}
			for _, a := range raw.Approvers {
				if a.TokenEnv != "" {
					tokens[a.TokenEnv] = true
				}
			}
			refs := map[string]bool{}
			for _, m := range envRef.FindAllStringSubmatch(data, -1) {
				refs[m[1]] = true
			}
			set := map[string]bool{}
			for _, e := range v.env {
				if set[e.Name] {
					t.Errorf("env %s is set twice", e.Name)
				}
				set[e.Name] = true
				_, goRuntime := goRuntimeEnv[e.Name]
				if !known[e.Name] && !tokens[e.Name] && !refs[e.Name] && !goRuntime {
					t.Errorf("env %s is neither in config.EnvVars, an approvers[].token_env, a ${%s} in config.yaml, nor a Go runtime variable", e.Name, e.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					ref := e.ValueFrom.SecretKeyRef
					if !secrets[ref.Name][ref.Key] {
						t.Errorf("env %s: Secret %s has no key %q under deploy/", e.Name, ref.Name, ref.Key)
					}
				}
			}
			for tok := range tokens {
				if !set[tok] {
					t.Errorf("approver token_env %s is not set on the container: that approver could never sign in", tok)
				}
			}
		})
	}
}

// fakeEnv is what the container would see: its own env only (never the test's), with secrets
// and resource fields replaced by stand-ins.
func fakeEnv(env []envVar) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			if strings.Contains(e.ValueFrom.SecretKeyRef.Key, "url") {
				out[e.Name] = "redis://:secret@tollgate-redis:6379/0"
			} else {
				out[e.Name] = "test-secret-" + e.ValueFrom.SecretKeyRef.Key
			}
		default:
			out[e.Name] = "1"
		}
	}
	return out
}

func TestConfigMapConfigParses(t *testing.T) {
	ms := loadManifests(t)
	d, _ := baseTollgate(t, ms)
	vol := configVolume(t, &d.Spec.Template.Spec)
	// What each variant must end up with; a new overlay gets a row here.
	wantStore := map[string]string{
		"base":            config.StoreAuto,
		"overlays/single": config.StoreAuto,
		"overlays/ha":     config.StoreRedis,
		"overlays/stdio":  config.StoreAuto,
	}
	vs := variants(t, ms)
	if len(vs) != len(wantStore) {
		t.Errorf("variants %d, want %d: add new overlays to wantStore", len(vs), len(wantStore))
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			// Lay the ConfigMap out as the kubelet does for this volume.
			dir := t.TempDir()
			files := map[string]string{} // path in the volume → key
			if len(vol.ConfigMap.Items) == 0 {
				for k := range v.data {
					files[k] = k
				}
			}
			for _, it := range vol.ConfigMap.Items {
				if _, ok := v.data[it.Key]; !ok {
					t.Errorf("volume item %q: no such key in ConfigMap %s", it.Key, configMapName)
				}
				files[it.Path] = it.Key
			}
			mounted := map[string]bool{}
			for p, key := range files {
				mounted[key] = true
				full := filepath.Join(dir, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(v.data[key]), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range sortedKeys(v.data) {
				if !mounted[k] {
					t.Errorf("ConfigMap key %q is not mounted: add it to the volume's items", k)
				}
			}
			if files["config.yaml"] != "config.yaml" {
				t.Fatal("config.yaml is not mounted at " + configDir + "/config.yaml")
			}

			env := fakeEnv(v.env)
			lookup := func(name string) (string, bool) { val, ok := env[name]; return val, ok }
			cfgPath := filepath.Join(dir, "config.yaml")
			cfg, err := config.Parse([]byte(v.data["config.yaml"]), cfgPath, lookup)
			if err != nil {
				t.Fatalf("config.yaml does not parse with the container's env:\n%v", err)
			}

			if len(cfg.Sources) != 1 || cfg.Sources[0].URL != env["TOLLGATE_UPSTREAM_URL"] {
				t.Errorf("sources: %+v, want one with url %q", cfg.Sources, env["TOLLGATE_UPSTREAM_URL"])
			}
			for _, l := range []struct{ got, env string }{
				{cfg.Server.Listen, "TOLLGATE_LISTEN"},
				{cfg.Server.AdminListen, "TOLLGATE_ADMIN_LISTEN"},
			} {
				if l.got != env[l.env] {
					t.Errorf("listen address %q, want %q from %s", l.got, env[l.env], l.env)
				}
			}
			if want := wantStore[v.name]; cfg.Tasks.Store.Type != want {
				t.Errorf("tasks.store.type %q, want %q", cfg.Tasks.Store.Type, want)
			}
			if cfg.Tasks.Store.Type == config.StoreRedis && cfg.Tasks.Store.URL != env["TOLLGATE_REDIS_URL"] {
				t.Errorf("tasks.store.url %q, want the Secret's value", cfg.Tasks.Store.URL)
			}

			// Every policy the config names is in the volume, compiles, and every .cedar key
			// of the ConfigMap is used.
			used := map[string]bool{}
			for _, p := range cfg.Cedar.Policies {
				resolved := cfg.ResolvePath(p)
				rel, err := filepath.Rel(dir, resolved)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("policy %s resolves outside %s", p, configDir)
					continue
				}
				key, ok := files[filepath.ToSlash(rel)]
				if !ok {
					t.Errorf("policy %s: %s/%s is not in the volume", p, configDir, filepath.ToSlash(rel))
					continue
				}
				used[key] = true
				if _, err := cedar.NewPolicySetFromBytes(key, []byte(v.data[key])); err != nil {
					t.Errorf("policy %s: %v", p, err)
				}
			}
			for k := range v.data {
				if strings.HasSuffix(k, ".cedar") && !used[k] {
					t.Errorf("ConfigMap key %s is not listed in cedar.policies", k)
				}
			}
		})
	}
}

// TestDataDirIsAWritableVolume: the default task store (auto) lives in $TOLLGATE_DATA_DIR; in
// the pod that must be a volume mounted read-write there, or Tollgate falls back to memory
// (readOnlyRootFilesystem stays true: TestDeploymentsAreHardened) and approvals die with it.
func TestDataDirIsAWritableVolume(t *testing.T) {
	ms := loadManifests(t)
	d, c := baseTollgate(t, ms)
	dataDir, ok := c.env(config.EnvDataDir)
	if !ok || !filepath.IsAbs(dataDir.Value) {
		t.Fatalf("the tollgate container sets no absolute %s (%+v)", config.EnvDataDir, dataDir)
	}
	var mount *volumeMount
	for i, vm := range c.VolumeMounts {
		if vm.MountPath == dataDir.Value {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || mount.ReadOnly || mount.SubPath != "" {
		t.Fatalf("no read-write volume mounted at %s: %+v", dataDir.Value, c.VolumeMounts)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name {
			if v.EmptyDir == nil && v.PersistentVolumeClaim == nil {
				t.Errorf("volume %s at %s is neither an emptyDir nor a PersistentVolumeClaim", v.Name, dataDir.Value)
			}
			return
		}
	}
	t.Errorf("volume %s is not declared", mount.Name)
}

// TestConfigPathMatchesArgs ties the container's --config to where the volume puts the file.
func TestConfigPathMatchesArgs(t *testing.T) {
	ms := loadManifests(t)
	d, c := baseTollgate(t, ms)
	vol := configVolume(t, &d.Spec.Template.Spec)
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("args %q: no --config", c.Args)
	}
	rel := strings.TrimPrefix(c.Args[i+1], configDir+"/")
	found := len(vol.ConfigMap.Items) == 0 && rel == "config.yaml"
	for _, it := range vol.ConfigMap.Items {
		found = found || (it.Path == rel && it.Key == "config.yaml")
	}
	if !found {
		t.Errorf("--config %s is not where the volume puts config.yaml", c.Args[i+1])
	}
}

func TestServicesTargetDeclaredPorts(t *testing.T) {
	ms := loadManifests(t)
	deps := fullDeployments(t, ms)
	patches := patchFiles(t, ms)
	wantPort := map[string]int{ // Service → port name → number fixed by docs/contract.md §4
		"tollgate/mcp":         config.DefaultListenPort,
		"tollgate-admin/admin": config.DefaultAdminPort,
	}
	seen := map[string]bool{}
	for _, m := range byKind(ms, "Service") {
		if patches[m.File] {
			continue
		}
		t.Run(m.String(), func(t *testing.T) {
			var s service
			m.decode(t, &s)
			var pods []*podSpec
			for _, d := range deps {
				if selects(s.Spec.Selector, d.Spec.Template.Metadata.Labels) {
					pods = append(pods, &d.Spec.Template.Spec)
				}
			}
			if len(pods) == 0 {
				t.Fatalf("selector %v matches no Deployment's pods", s.Spec.Selector)
			}
			for _, p := range s.Spec.Ports {
				key := m.Metadata.Name + "/" + p.Name
				if want, ok := wantPort[key]; ok {
					seen[key] = true
					if p.Port != want {
						t.Errorf("port %s = %d, want %d", p.Name, p.Port, want)
					}
				}
				name, ok := p.TargetPort.(string)
				if !ok {
					t.Errorf("port %s: targetPort %v: use the container port's name", p.Name, p.TargetPort)
					continue
				}
				for _, pod := range pods {
					found := false
					for _, c := range pod.Containers {
						_, ok := c.portNamed(name)
						found = found || ok
					}
					if !found {
						t.Errorf("port %s: targetPort %q is not a container port of the selected pods", p.Name, name)
					}
				}
			}
		})
	}
	for k := range wantPort {
		if !seen[k] {
			t.Errorf("no Service port %s", k)
		}
	}
}

func TestServiceMonitorScrapesAdminMetrics(t *testing.T) {
	ms := loadManifests(t)
	sms := byKind(ms, "ServiceMonitor")
	if len(sms) == 0 {
		t.Fatal("no ServiceMonitor")
	}
	for _, m := range sms {
		var sm struct {
			Spec struct {
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
				Endpoints []struct {
					Port string `yaml:"port"`
					Path string `yaml:"path"`
				} `yaml:"endpoints"`
			} `yaml:"spec"`
		}
		m.decode(t, &sm)
		var ports []string
		for _, s := range byKind(ms, "Service") {
			if selects(sm.Spec.Selector.MatchLabels, s.Metadata.Labels) {
				var svc service
				s.decode(t, &svc)
				for _, p := range svc.Spec.Ports {
					ports = append(ports, fmt.Sprintf("%s:%d", p.Name, p.Port))
				}
			}
		}
		want := fmt.Sprintf("admin:%d", config.DefaultAdminPort)
		if !slices.Contains(ports, want) {
			t.Errorf("%s: selects Service ports %v, want the admin Service (%s)", m, ports, want)
		}
		if len(sm.Spec.Endpoints) == 0 {
			t.Errorf("%s: no endpoints", m)
		}
		for _, e := range sm.Spec.Endpoints {
			if e.Port != "admin" || e.Path != "/metrics" {
				t.Errorf("%s: endpoint %s%s, want admin/metrics", m, e.Port, e.Path)
			}
		}
	}
}

func TestPodDisruptionBudgetSelectsTollgate(t *testing.T) {
	ms := loadManifests(t)
	d, _ := baseTollgate(t, ms)
	pdbs := byKind(ms, "PodDisruptionBudget")
	if len(pdbs) == 0 {
		t.Fatal("no PodDisruptionBudget")
	}
	for _, m := range pdbs {
		var pdb struct {
			Spec struct {
				MinAvailable   any `yaml:"minAvailable"`
				MaxUnavailable any `yaml:"maxUnavailable"`
				Selector       struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
			} `yaml:"spec"`
		}
		m.decode(t, &pdb)
		if !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
			t.Errorf("%s: selector does not match the tollgate pods", m)
		}
		// minAvailable: 1 with one replica would block every node drain.
		if pdb.Spec.MaxUnavailable == nil {
			t.Errorf("%s: want maxUnavailable so a single replica does not block drains", m)
		}
	}
}

// TestSecretsArePlaceholders keeps real credentials out of the repository: every Secret value
// is an obvious placeholder, in stringData so a reviewer sees it.
func TestSecretsArePlaceholders(t *testing.T) {
	ms := loadManifests(t)
	for _, m := range byKind(ms, "Secret") {
		var s secret
		m.decode(t, &s)
		if len(s.Data) > 0 {
			t.Errorf("%s: use stringData with placeholder values, not base64 data", m)
		}
		if len(s.StringData) == 0 {
			t.Errorf("%s: no stringData", m)
		}
		for _, k := range sortedKeys(s.StringData) {
			if !strings.Contains(s.StringData[k], "CHANGE-ME") {
				t.Errorf("%s: key %s does not look like a placeholder (want CHANGE-ME in it)", m, k)
			}
		}
	}
}

// TestSecretsAreFiles: no secret reaches Tollgate through its environment, which every process
// of its user can read (/proc/<pid>/environ) — a stdio server, anything exec'd into the pod. The
// secret variables are their *_FILE forms and approvers use token_file; each file named is a
// key of a Secret mounted read-only where the name points, readable by no one but the pod's
// group. Fails on the manifests that set TOLLGATE_ADMIN_TOKEN and approvers' token_env from
// secretKeyRef.
func TestSecretsAreFiles(t *testing.T) {
	ms := loadManifests(t)
	secretKeys := map[string]map[string]bool{}
	for _, m := range byKind(ms, "Secret") {
		var s secret
		m.decode(t, &s)
		keys := map[string]bool{}
		for k := range s.StringData {
			keys[k] = true
		}
		for k := range s.Data {
			keys[k] = true
		}
		secretKeys[m.Metadata.Name] = keys
	}
	secretVars := map[string]bool{}
	for _, n := range config.SecretEnvVars {
		secretVars[n] = true
	}
	for _, v := range variants(t, ms) {
		t.Run(v.name, func(t *testing.T) {
			// fileInSecret reports whether path is a key of a Secret volume the container
			// mounts read-only, and that volume's mode keeps others out.
			fileInSecret := func(what, p string) {
				t.Helper()
				for _, m := range v.mounts {
					dir := strings.TrimRight(m.MountPath, "/") + "/"
					if !strings.HasPrefix(p, dir) {
						continue
					}
					rel := strings.TrimPrefix(p, dir)
					i := slices.IndexFunc(v.volumes, func(vol volume) bool { return vol.Name == m.Name })
					if i < 0 || v.volumes[i].Secret == nil {
						t.Errorf("%s: %s is under %s, which is not a Secret volume", what, p, m.MountPath)
						return
					}
					sv := v.volumes[i].Secret
					if !m.ReadOnly {
						t.Errorf("%s: Secret volume %s is mounted writable", what, m.Name)
					}
					if sv.DefaultMode == nil || *sv.DefaultMode&0o007 != 0 {
						t.Errorf("%s: Secret volume %s needs a defaultMode without access for others (e.g. 0440)", what, m.Name)
					}
					key := rel
					if len(sv.Items) > 0 {
						key = ""
						for _, it := range sv.Items {
							if it.Path == rel {
								key = it.Key
							}
						}
					}
					if key == "" || !secretKeys[sv.SecretName][key] {
						t.Errorf("%s: %s is no key of Secret %s under deploy/", what, p, sv.SecretName)
					}
					return
				}
				t.Errorf("%s: %s is under no volume the tollgate container mounts", what, p)
			}

			for _, e := range v.env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && (secretVars[e.Name] || strings.HasSuffix(e.Name, "_TOKEN")) {
					fix := e.Name + config.FileSuffix
					if !secretVars[e.Name] {
						fix = "approvers[].token_file"
					}
					t.Errorf("env %s comes from Secret %s into the environment: use %s and a mounted file", e.Name, e.ValueFrom.SecretKeyRef.Name, fix)
				}
				if base, ok := strings.CutSuffix(e.Name, config.FileSuffix); ok && secretVars[base] {
					fileInSecret("env "+e.Name, e.Value)
				}
			}
			var raw rawConfig
			if err := yaml.Unmarshal([]byte(v.data["config.yaml"]), &raw); err != nil {
				t.Fatalf("config.yaml: %v", err)
			}
			for _, a := range raw.Approvers {
				if a.TokenFile == "" {
					t.Errorf("approver %s: token_env keeps the token in the environment; use token_file", a.Name)
					continue
				}
				fileInSecret("approver "+a.Name, a.TokenFile)
			}
		})
	}
}
