package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// kustomizeCommand finds a kustomize: kubectl's built-in one or a standalone binary.
func kustomizeCommand() (name string, args []string, ok bool) {
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p, []string{"kustomize"}, true
	}
	if p, err := exec.LookPath("kustomize"); err == nil {
		return p, []string{"build"}, true
	}
	return "", nil, false
}

// TestKustomizeBuildOverlays renders each overlay with the real kustomize, which catches what
// the file-level tests cannot: patch targets that do not exist, merge results, name clashes.
func TestKustomizeBuildOverlays(t *testing.T) {
	bin, args, ok := kustomizeCommand()
	if !ok {
		t.Skip("neither kubectl nor kustomize is on PATH; overlay rendering not checked (install kubectl to run this test)")
	}
	root := repoRoot(t)
	tests := []struct {
		overlay   string
		replicas  int
		taskStore string // TOLLGATE_TASK_STORE on the tollgate container, "" = unset (auto: a file in $TOLLGATE_DATA_DIR)
		affinity  string // Service tollgate spec.sessionAffinity
		redis     bool
		stdio     bool // Tollgate runs the server: no sidecar, no upstream URL
	}{
		{overlay: "single", replicas: 1},
		{overlay: "ha", replicas: 3, taskStore: "redis", affinity: "ClientIP", redis: true},
		{overlay: "stdio", replicas: 1, stdio: true},
	}
	for _, tt := range tests {
		t.Run(tt.overlay, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(args, filepath.Join(root, "deploy", "overlays", tt.overlay))...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.String())
			}

			objs := map[string]*yaml.Node{} // kind/name → document
			dec := yaml.NewDecoder(&stdout)
			for {
				var n yaml.Node
				if err := dec.Decode(&n); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("rendered output: %v", err)
				}
				var h manifest
				if err := n.Decode(&h); err != nil {
					t.Fatal(err)
				}
				objs[h.Kind+"/"+h.Metadata.Name] = &n
			}
			for _, k := range []string{
				"ConfigMap/tollgate-config", "Secret/tollgate-secrets", "Deployment/tollgate",
				"Service/tollgate", "Service/tollgate-admin", "PodDisruptionBudget/tollgate",
				"ServiceMonitor/tollgate",
			} {
				if objs[k] == nil {
					t.Errorf("rendered output has no %s", k)
				}
			}
			if got := objs["Deployment/tollgate-redis"] != nil; got != tt.redis {
				t.Errorf("Redis Deployment rendered: %v, want %v", got, tt.redis)
			}

			var d deployment
			if n := objs["Deployment/tollgate"]; n != nil {
				if err := n.Decode(&d); err != nil {
					t.Fatal(err)
				}
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != tt.replicas {
				t.Errorf("replicas %v, want %d", d.Spec.Replicas, tt.replicas)
			}
			c := containerNamed(t, &d.Spec.Template.Spec, tollgateName)
			store, _ := c.env("TOLLGATE_TASK_STORE")
			if store.Value != tt.taskStore {
				t.Errorf("TOLLGATE_TASK_STORE %q, want %q", store.Value, tt.taskStore)
			}
			if tt.stdio {
				if n := len(d.Spec.Template.Spec.Containers); n != 1 {
					t.Errorf("%d containers, want tollgate alone (it starts the stdio server)", n)
				}
				if _, ok := c.env("TOLLGATE_UPSTREAM_URL"); ok {
					t.Error("TOLLGATE_UPSTREAM_URL would set a url beside sources[0].command")
				}
				var cm configMap
				if n := objs["ConfigMap/tollgate-config"]; n != nil {
					if err := n.Decode(&cm); err != nil {
						t.Fatal(err)
					}
				}
				if !strings.Contains(cm.Data["config.yaml"], "command: mcp-server-filesystem") {
					t.Error("rendered config.yaml has no stdio command source")
				}
			}
			// The patch must merge into the base env, not replace it.
			for _, name := range []string{"TOLLGATE_LISTEN", "TOLLGATE_DATA_DIR"} {
				if _, ok := c.env(name); !ok {
					t.Errorf("%s lost in the rendered container env", name)
				}
			}

			var svc struct {
				Spec struct {
					SessionAffinity string `yaml:"sessionAffinity"`
				} `yaml:"spec"`
			}
			if n := objs["Service/tollgate"]; n != nil {
				if err := n.Decode(&svc); err != nil {
					t.Fatal(err)
				}
			}
			if svc.Spec.SessionAffinity != tt.affinity {
				t.Errorf("Service tollgate sessionAffinity %q, want %q", svc.Spec.SessionAffinity, tt.affinity)
			}
		})
	}
}
