package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"ratelab/grader"
	"ratelab/internal/release"
)

// ghWorkflow is the part of a GitHub Actions workflow the tests read.
type ghWorkflow struct {
	Name        string           `yaml:"name"`
	On          yaml.Node        `yaml:"on"`
	Permissions yaml.Node        `yaml:"permissions"`
	Jobs        map[string]ghJob `yaml:"jobs"`
}

type ghJob struct {
	Name        string            `yaml:"name"`
	If          string            `yaml:"if"`
	RunsOn      yaml.Node         `yaml:"runs-on"`
	Permissions yaml.Node         `yaml:"permissions"`
	Services    map[string]any    `yaml:"services"`
	Env         map[string]string `yaml:"env"`
	Steps       []ghStep          `yaml:"steps"`
}

type ghStep struct {
	ID              string            `yaml:"id"`
	Name            string            `yaml:"name"`
	If              string            `yaml:"if"`
	Uses            string            `yaml:"uses"`
	Run             string            `yaml:"run"`
	With            map[string]string `yaml:"with"`
	Env             map[string]string `yaml:"env"`
	ContinueOnError yaml.Node         `yaml:"continue-on-error"`
}

// readWorkflow parses a workflow file and checks that every job has steps
// and every step either uses an action or runs a command.
func readWorkflow(t *testing.T, path string) ghWorkflow {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var wf ghWorkflow
	require.NoError(t, yaml.Unmarshal(b, &wf), "%s is not valid YAML for a workflow", path)
	require.NotEmpty(t, wf.Jobs, "%s has no jobs", path)
	for id, j := range wf.Jobs {
		require.NotEmpty(t, j.Steps, "%s: job %s has no steps", path, id)
		for i, s := range j.Steps {
			assert.True(t, (s.Uses == "") != (s.Run == ""), "%s: job %s step %d (%s) needs exactly one of uses and run", path, id, i+1, s.Name)
		}
	}
	return wf
}

// events returns the trigger names of a workflow's on: a string, a list or
// a mapping.
func events(t *testing.T, n yaml.Node) []string {
	t.Helper()
	switch n.Kind {
	case yaml.ScalarNode:
		return []string{n.Value}
	case yaml.SequenceNode:
		var out []string
		for _, c := range n.Content {
			out = append(out, c.Value)
		}
		return out
	case yaml.MappingNode:
		var out []string
		for i := 0; i < len(n.Content); i += 2 {
			out = append(out, n.Content[i].Value)
		}
		return out
	}
	t.Fatalf("the workflow has no on: triggers")
	return nil
}

// permissions returns a permissions block as scope → access; a block given
// as one word (read-all, write-all) is returned under "*". ok is false if
// the block is absent.
func permissions(t *testing.T, n yaml.Node) (perms map[string]string, ok bool) {
	t.Helper()
	switch n.Kind {
	case 0:
		return nil, false
	case yaml.ScalarNode:
		return map[string]string{"*": n.Value}, true
	case yaml.MappingNode:
		var m map[string]string
		require.NoError(t, n.Decode(&m))
		return m, true
	}
	t.Fatalf("permissions: unexpected YAML at line %d", n.Line)
	return nil, false
}

// classroomWorkflow finds the learners' workflow: under template/ in this
// repository, under .github/ in an exported template.
func classroomWorkflow(t *testing.T) string {
	t.Helper()
	root, err := grader.FindRoot(".")
	require.NoError(t, err)
	for _, p := range []string{release.WorkflowSource, release.Workflow} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			return filepath.Join(root, p)
		}
	}
	t.Fatalf("neither %s nor %s exists", release.WorkflowSource, release.Workflow)
	return ""
}

func TestClassroomWorkflow(t *testing.T) {
	path := classroomWorkflow(t)
	wf := readWorkflow(t, path)

	on := events(t, wf.On)
	assert.Contains(t, on, "push")
	assert.Contains(t, on, "pull_request")
	for _, e := range []string{"pull_request_target", "workflow_run"} {
		assert.NotContains(t, on, e, "%s runs with a privileged token on code the workflow did not choose; never grade under it", e)
	}

	require.Len(t, wf.Jobs, 1, "one job")
	var job ghJob
	for _, j := range wf.Jobs {
		job = j
	}
	assert.Empty(t, job.Services, "grading starts nothing beside Go")

	// Read-only: a permissions block at the top or on the job (else the
	// repository's default token applies, which may write), and nothing in
	// any block that writes.
	top, hasTop := permissions(t, wf.Permissions)
	own, hasOwn := permissions(t, job.Permissions)
	require.True(t, hasTop || hasOwn, "the workflow must set permissions, or the token gets the repository's default")
	effective := top
	if hasOwn {
		effective = own // a job's block replaces the top one
	}
	assert.Equal(t, "read", effective["contents"], "contents: read")
	for _, m := range []map[string]string{top, own} {
		for scope, access := range m {
			assert.NotContains(t, access, "write", "permissions %s: %s: the workflow must stay read-only", scope, access)
		}
	}

	steps := job.Steps
	find := func(what string, match func(ghStep) bool) (int, ghStep) {
		t.Helper()
		for i, s := range steps {
			if match(s) {
				return i, s
			}
		}
		t.Fatalf("%s: no step %s", path, what)
		return -1, ghStep{}
	}
	_, setup := find("sets up Go", func(s ghStep) bool { return strings.HasPrefix(s.Uses, "actions/setup-go@") })
	assert.Equal(t, "1.26", setup.With["go-version"])

	bi, build := find("builds grade", func(s ghStep) bool { return strings.Contains(s.Run, "go build") })
	assert.Equal(t, `go build -o "$RUNNER_TEMP/grade" ./cmd/grade`, strings.TrimSpace(build.Run),
		"a built binary keeps grade's exit codes; go run turns them all into 1")
	gi, gradeStep := find("runs grade all --format github", func(s ghStep) bool {
		return strings.Contains(s.Run, `"$RUNNER_TEMP/grade" all`) && strings.Contains(s.Run, "--format github")
	})
	assert.Greater(t, gi, bi, "grading comes after the build")
	assert.Contains(t, gradeStep.Run, `--out "$RUNNER_TEMP/results"`)
	assert.Contains(t, gradeStep.Run, "--junit")
	assert.Empty(t, gradeStep.If, "grading always runs")
	assert.NotEqual(t, "true", gradeStep.ContinueOnError.Value, "a failed grade must fail the job")

	ui, upload := find("uploads the results", func(s ghStep) bool { return strings.HasPrefix(s.Uses, "actions/upload-artifact@") })
	assert.Greater(t, ui, gi, "the upload comes after grading")
	assert.Contains(t, upload.If, "always()", "the report is uploaded when grading fails too")
	assert.Contains(t, upload.With["path"], "${{ runner.temp }}/results")

	ri, runner := find("with id ratelab", func(s ghStep) bool { return s.ID == "ratelab" })
	assert.Contains(t, runner.Run, `"$RUNNER_TEMP/grade" report`, "Classroom's result comes from the same grading, not a second one")
	assert.Contains(t, runner.Run, `"$RUNNER_TEMP/results"`, "it reads the results.json the grade step wrote")
	assert.Contains(t, runner.Run, "--format classroom")
	assert.Greater(t, ri, gi, "the Classroom result comes after grading")
	assert.True(t, strings.Contains(runner.If, "always()") || strings.Contains(runner.If, "!cancelled()"), "Classroom gets a score when grading fails too")

	pi, reporter := find("reports to Classroom", func(s ghStep) bool {
		return strings.HasPrefix(s.Uses, "classroom-resources/autograding-grading-reporter@")
	})
	assert.Greater(t, pi, ri, "the reporter comes after the runner")
	assert.Equal(t, "ratelab", reporter.With["runners"])
	assert.Equal(t, "${{ steps.ratelab.outputs.result }}", strings.TrimSpace(reporter.Env["RATELAB_RESULTS"]),
		"the reporter reads <RUNNER>_RESULTS for each runner")
	assert.True(t, strings.Contains(reporter.If, "always()") || strings.Contains(reporter.If, "!cancelled()"))

	// Nothing but building and running grade, and the actions above, runs.
	for i, s := range steps {
		if s.Run != "" && i != bi {
			assert.True(t, strings.HasPrefix(strings.TrimSpace(s.Run), `"$RUNNER_TEMP/grade" `), "step %q runs %q", s.Name, s.Run)
		}
	}
}

// TestCIWorkflow checks that the project's own CI parses (it is not part of
// a learner template, where the test has nothing to read).
func TestCIWorkflow(t *testing.T) {
	root, err := grader.FindRoot(".")
	require.NoError(t, err)
	path := filepath.Join(root, ".github", "workflows", "ci.yml")
	if _, err := os.Stat(path); err != nil {
		t.Skip("no .github/workflows/ci.yml here (a learner template)")
	}
	wf := readWorkflow(t, path)
	on := events(t, wf.On)
	assert.True(t, slices.Contains(on, "push") || slices.Contains(on, "pull_request"), "ci runs on push or pull_request: %v", on)
	assert.NotContains(t, on, "pull_request_target")
}
