/* The compatibility explorer filter (issue 39): written with the explorer page. */
