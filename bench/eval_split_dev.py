"""The dev split of the default-model eval: prompts the default path may be tuned on.

The first 45 are the eval as it stood before the test split existed (issue 12 tuned the default
path against them, so they can only ever be dev). Case kinds and the workspace they run in:
`eval_cases`. Figures from this split are reported beside the test split's, never instead.
"""

from __future__ import annotations

from eval_cases import Case, plain, tool

READ = "read_file"
SHELL = "run_shell"
CASES: tuple[Case, ...] = (
    plain("Hi! What is 2 + 2?", "4"),
    plain("Say hello.", "hello", "hi"),
    plain("What is the capital of France?", "Paris"),
    plain("How many days are in a week?", "7", "seven"),
    plain("What is 12 times 12?", "144"),
    plain("Who wrote Romeo and Juliet?", "Shakespeare"),
    plain("What colour is the sky on a clear day?", "blue"),
    plain("Translate 'thank you' into French.", "merci"),
    plain("What is the boiling point of water in Celsius?", "100"),
    plain("Name the largest planet in the solar system.", "Jupiter"),
    plain("What does CPU stand for?", "processing unit"),
    plain("Thanks, that's all for now."),
    plain("What is the square root of 81?", "9"),
    plain("In what year did World War II end?", "1945"),
    plain("Give me a synonym for 'happy'."),
    plain("In Python, how do I reverse a list?", "reverse", "[::-1]"),
    plain("Write a Python function that returns the square of a number.", "def "),
    plain("What does len([1, 2, 3]) return in Python?", "3"),
    plain("How do I print hello world in JavaScript?", "console.log"),
    plain("In one sentence: the difference between a list and a tuple in Python?", "mutable"),
    plain("Write a SQL query that selects all rows from a table named users.", "select"),
    plain("What does HTTP status code 404 mean?", "not found"),
    plain("How do I create a virtual environment in Python?", "venv"),
    plain("Fix this Python 2 line for Python 3: print 'hi'", "print("),
    plain("What is a Python decorator, in one sentence?", "function"),
    plain("What is the time complexity of binary search?", "log"),
    plain("What is 15% of 200?", "30"),
    plain(
        "And roughly how many people live there?",
        "million",
        before=("What is the capital of Italy?",),
    ),
    plain("What is my name?", "Ada", before=("Hello, my name is Ada.",)),
    plain("Multiply that by 2.", "16", before=("What is 5 + 3?",)),
    plain(
        "Now make it return the sum of three numbers.",
        "def",
        before=("Write a Python function add(a, b).",),
    ),
    tool(
        "Read notes.txt and tell me when the meeting is.", {READ: {"path": "notes.txt"}}, "Thursday"
    ),
    tool(
        "What files are in this workspace?",
        {"list_files": {}, SHELL: {"command": "ls"}},
        "notes.txt",
    ),
    tool("Show me the contents of src/app.py.", {READ: {"path": "src/app.py"}}, "greet"),
    tool(
        "Search the files for the word TODO.",
        {"search_files": {"pattern": "TODO"}, SHELL: {"command": "TODO"}},
    ),
    tool("Run `python --version` in the shell.", {SHELL: {"command": "python"}}),
    tool(
        "Create a file hello.txt containing the text 'hi there'.",
        {"write_file": {"path": "hello.txt"}},
    ),
    tool(
        "List the files in the src folder.",
        {"list_files": {"path": "src"}, SHELL: {"command": "src"}},
    ),
    tool("Open todo.md and tell me the first item.", {READ: {"path": "todo.md"}}, "milk"),
    tool(
        "Which file defines the function greet? Search the workspace.",
        {"search_files": {"pattern": "greet"}, SHELL: {"command": "greet"}},
        "app.py",
    ),
    tool(
        "In src/app.py, replace 'Hello' with 'Hi'.",
        {"edit_file": {"path": "src/app.py"}, "write_file": {"path": "src/app.py"}},
    ),
    tool("Run the tests with pytest.", {SHELL: {"command": "pytest"}}),
    tool(
        "Read data.csv and tell me the population of Bergen.", {READ: {"path": "data.csv"}}, "291"
    ),
    tool("Show the current directory with pwd.", {SHELL: {"command": "pwd"}}),
    tool("Delete the file old.log using the shell.", {SHELL: {"command": "old.log"}}),
)
