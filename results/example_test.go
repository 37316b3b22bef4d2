package results_test

import (
	"bytes"
	"fmt"
	"strings"

	"ratelab/results"
)

// A document is built from its checks, totalled, encoded and read back
// strictly: the reader gets the same typed values, never text to parse.
func ExampleDecode() {
	doc := &results.Document{Schema: results.Schema, Task: "task3", Impl: "exercises"}
	doc.Checks = []results.Check{
		{Task: "task3", Name: "unit: starts full and refills at its rate", Status: results.StatusPass, Score: 2, MaxScore: 2},
		{Task: "task3", Name: "flood: at most 720 admitted in 10 s", Status: results.StatusFail, MaxScore: 3,
			Measured: map[string]float64{"ok": 740}, Expected: map[string]float64{"ok": 720}},
	}
	doc.Total()
	var buf bytes.Buffer
	if err := doc.Encode(&buf); err != nil {
		fmt.Println(err)
		return
	}
	back, err := results.Decode(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.Status, back.Score, "of", back.MaxScore)
	fmt.Println(back.Checks[1].Measured["ok"], "admitted, at most", back.Checks[1].Expected["ok"])

	// A truncated file is refused with a reason a person can read.
	_, err = results.Decode(strings.NewReader(`{"schema": "ratelab.results/v1", "task": "ta`))
	fmt.Println(err != nil)
	// Output:
	// fail 2 of 5
	// 740 admitted, at most 720
	// true
}

// An interrupted grading is no verdict: Total gives it no score, whatever
// its finished checks say, and its JSON says null.
func ExampleDocument_Total_interrupted() {
	doc := &results.Document{Schema: results.Schema, Task: "task1", Interrupted: true}
	doc.Checks = []results.Check{{Task: "task1", Name: "unit: model", Status: results.StatusPass, Score: 4, MaxScore: 4}}
	doc.Total()
	var buf bytes.Buffer
	if err := doc.Encode(&buf); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(doc.Status, strings.Contains(buf.String(), `"score": null`))
	// Output: interrupted true
}
