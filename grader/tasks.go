package grader

// tasks is the lab's metadata: every task with its files, handout and hints.
// Hints name the idea and where to read more; they never contain code.
var tasks = []Task{
	{
		ID:      "task1",
		Number:  1,
		Title:   "watch an unprotected server collapse",
		Handout: "docs/tasks/task1.md",
		Hints: []string{
			"There is no code to write: task 1 floods the unprotected server and checks\n" +
				"the measurements against the one-line model in the lesson's Measure section.\n" +
				"Read \"What overload actually does\" and predict each row before you run it.",
			"The model: the line grows by λ−C per second, and a request succeeds only if\n" +
				"its wait plus the work fits in the client's timeout. Solve for the arrival\n" +
				"time where that stops being true, then multiply by λ.",
		},
		grade: gradeTask1,
	},
}

// Tasks returns every task in order.
func Tasks() []Task { return append([]Task(nil), tasks...) }

// Lookup returns the task with the given ID, such as "task1".
func Lookup(id string) (Task, bool) {
	for _, t := range tasks {
		if t.ID == id {
			return t, true
		}
	}
	return Task{}, false
}
