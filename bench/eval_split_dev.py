"""The dev split of the default-model eval: prompts the default path may be tuned on.

The first 45 are the eval as it stood before the test split existed (issue 12 tuned the default
path against them, so they can only ever be dev). Case kinds and the workspace they run in:
`eval_cases`. Figures from this split are reported beside the test split's, never instead.
"""

from __future__ import annotations

from eval_cases import ANY_PATH, Case, plain, tool

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
    # Grown from here on: written the way users talk to a notebook assistant (terse, lowercase,
    # typos, indirect asks), to make the dev split realistic. Not tuned on before being added.
    plain("whats 37 * 48", "1776", "1,776"),
    plain("how much is 125x64", "8000", "8,000"),
    plain("quick one, 19 times 23?", "437"),
    plain("hey what does grep -r actually do", "recursive"),
    plain("whats a symlink", "symbolic", "point", "shortcut"),
    plain("how do i unzip a .zip file from the terminal?", "unzip"),
    plain(
        "dont run anything, just explain what git stash does",
        "uncommitted",
        "temporar",
        "save",
        "shelve",
    ),
    plain("pandas - drop rows where any column is NaN?", "dropna"),
    plain("how do i group by one column and sum another in pandas", "groupby"),
    plain("sql to count customers per country? table is just called customers", "group by"),
    plain("whats the diffrence between git pull and git fetch", "merge"),
    plain("capitol of australia?", "Canberra"),
    plain("is 97 a prime number", "yes", "is prime", "is a prime"),
    plain("How do I load a csv into pandas", "read_csv"),
    plain("what does chmod +x do to a file", "execut"),
    plain(
        "do NOT delete anything yet. whats the difference between rm and rm -r though?",
        "recursive",
        "director",
    ),
    plain("convert 100 fahrenheit to celsius pls", "37.7", "37.8"),
    plain("ok and divide that by 8", "125", before=("whats 250 times 4",)),
    plain(
        "can u make it ignore upper/lower case too",
        "lower",
        "casefold",
        before=("write a python function that checks if a string is a palindrome",),
    ),
    plain("who painted the mona lisa", "Leonardo", "Vinci"),
    plain("in bash how do I find all files bigger than 100MB", "-size"),
    plain("2 to the power of 16?", "65536", "65,536"),
    plain("without touching any files, how would i rename a file in bash?", "mv"),
    plain("what does if __name__ == '__main__' mean in a python script", "directly", "import"),
    plain(
        "is debug turned on?",
        "false",
        "off",
        "disabled",
        "not",
        before=("what's in config.yaml?",),
    ),
    plain("how do you see hidden files with ls", "-a"),
    plain("thx thats perfect"),
    tool("whats in notes.txt", {READ: {"path": "notes.txt"}}, "B12", "Thursday"),
    tool(
        "could u take a look at config.yaml and tell me what port the server runs on",
        {READ: {"path": "config.yaml"}, SHELL: {"command": "config.yaml"}},
        "8042",
    ),
    tool(
        "which database is this thing pointed at? it should be in the config",
        {READ: {"path": "config.yaml"}, SHELL: {"command": "config.yaml"}},
        "inventory.db",
    ),
    tool(
        "I wonder what's in the server log",
        {
            READ: {"path": "logs/server.log"},
            "list_files": {"path": "logs"},
            SHELL: {"command": "server.log"},
        },
        "Errno 111",
        "refused",
        "10.0.0.7",
    ),
    tool(
        "the server wont start, can you look at the logs and tell me why",
        {
            READ: {"path": "logs/server.log"},
            "list_files": {"path": "logs"},
            SHELL: {"command": "log"},
        },
        "refused",
        "10.0.0.7",
        "5432",
    ),
    tool(
        "which package versions are pinned in this project?",
        {READ: {"path": "requirements.txt"}, SHELL: {"command": "requirements"}},
        "2.1.4",
        "3.0.2",
    ),
    tool("which python version are we running on here", {SHELL: {"command": "python"}}),
    tool("how much free disk space is left on this box", {SHELL: {"command": "df"}}),
    tool("can u check which pandas version is actually installed", {SHELL: {"command": "pandas"}}),
    tool(
        "where's slugify defined",
        {"search_files": {"pattern": "slugify"}, SHELL: {"command": "slugify"}},
        "utils.py",
    ),
    tool(
        "find all the TODOs in the code pls",
        {"search_files": {"pattern": "TODO"}, SHELL: {"command": "TODO"}},
        "farewell",
        "app.py",
    ),
    tool(
        "don't run cleanup.sh, just read it and tell me what it deletes",
        {READ: {"path": "scripts/cleanup.sh"}},
        "build",
        "dist",
        "egg-info",
    ),
    tool(
        "what's in the scripts folder",
        {"list_files": {"path": "scripts"}, SHELL: {"command": "scripts"}},
        "cleanup.sh",
    ),
    tool(
        "what variables do i have in the notebook rn",
        {"list_notebook_variables": {}},
        "sales",
        "threshold",
    ),
    tool(
        "which regions ended up in big?",
        {"describe_variable": {"name": "big"}},
        "north",
        "east",
    ),
    tool(
        "Looking at my sales dataframe, which region brings in the most revenue?",
        {"describe_variable": {"name": "sales"}},
        "east",
        "1740",
    ),
    tool(
        "my last cell blew up, whats wrong with it",
        {"last_error": {}, "read_cell": {"number": "5"}},
        "discount",
    ),
    tool("what does cell 3 do", {"read_cell": {"number": "3"}}, "revenue"),
    tool(
        "what did i set threshold to in the notebook?",
        {
            "describe_variable": {"name": "threshold"},
            "list_notebook_variables": {},
            "read_cell": {"number": "4"},
        },
        "100",
    ),
    tool(
        "look at data.csv, which city's the biggest",
        {READ: {"path": "data.csv"}, SHELL: {"command": "data.csv"}},
        "Oslo",
    ),
    tool(
        "whats inside src/",
        {"list_files": {"path": "src"}, SHELL: {"command": "src"}},
        "utils.py",
    ),
    tool(
        "is there anything left on my todo list",
        {READ: {"path": "todo.md"}},
        "renew the domain",
        "release notes",
    ),
    tool(
        "now the test for it",
        {
            READ: {"path": "tests/test_app.py"},
            "list_files": {"path": "tests"},
            SHELL: {"command": "test_app"},
        },
        "Ada",
        before=("show me src/app.py",),
    ),
    tool(
        "open that file and show me what it does",
        {READ: {"path": "src/utils.py"}},
        "lower",
        "replace",
        before=("where is slugify defined?",),
    ),
    tool(
        "thanks. different thing, peek at README.md for me",
        {READ: {"path": "README.md"}},
        "Demo project",
        before=("whats 18*7",),
    ),
    tool(
        "add a farewell function to src/app.py, something like goodbye(name)",
        {
            "edit_file": {"path": "src/app.py"},
            "write_file": {"path": "src/app.py"},
            READ: {"path": "src/app.py"},
        },
    ),
    tool(
        "how does the area function work",
        {"search_files": {"pattern": "area"}, SHELL: {"command": "area"}},
        "pi",
        "radius",
    ),
    tool(
        "dont edit anything, i just want to know what greet returns. its in src/app.py",
        {READ: {"path": "src/app.py"}},
        "Hello",
    ),
    # Acting on the notebook (issue 23), appended to the dev split only, after the split was
    # frozen and before any tuning for these tools: insert, edit and run cells, run code. The
    # policy is "deny" in the eval, so only the turn's first call is scored, never its effect.
    tool(
        "ok put that in a new cell",
        {"insert_cell": {"source": "revenue"}},
        before=("how do i add up the revenue column of sales",),
    ),
    tool(
        "nice, now run that for me",
        {"run_code": {"code": "units"}, "run_cell": {}},
        before=("give me one line of code that sums the units column of my sales dataframe",),
    ),
    tool("can u run sales['units'].max() and tell me", {"run_code": {"code": "max"}}),
    tool(
        "add a markdown cell under the chat that says Revenue by region",
        {"insert_cell": {"source": "Revenue"}},
    ),
    tool("change threshold to 150 in cell 4", {"edit_cell": {"new": "150"}}),
    tool("rerun cell 3 pls", {"run_cell": {"cell": "3"}}),
    tool("which of my cells did i change without rerunning them?", {"list_cells": {}}),
    # Written on 2026-11-27 by someone who had read neither split nor the default path's rules,
    # from the workspace and the notebook alone, the way people type (issue 19: the dev-tuned
    # rules did not carry to the test split, so the dev split needed phrasing nobody had tuned
    # on). Appended to the dev split: the default path may be tuned on them.
    plain("whats a requirements.txt for", "depend", "package"),
    plain("what does rm -rf do exactly", "recurs"),
    plain("how do i read a yaml file in python", "yaml"),
    plain("explain what a .gitignore is", "track", "ignore"),
    plain("what's a good name for a config file?"),
    plain("2**16?", "65536"),
    plain("capital of australia", "Canberra"),
    plain(
        "how do I follow a log file live in linux, like watch the new lines come in as they "
        "get written",
        "tail -f",
        "tail -F",
    ),
    plain("write me a python function that checks if a number is prime", "def "),
    plain("whats the diff between a list and a tuple in python", "mutable"),
    plain("thanks, that's all for now!"),
    plain("in pandas how do i drop rows that have NaN in them", "dropna"),
    plain("how many bytes in a kibibyte", "1024"),
    plain("explain chmod +x to me like im five", "execut", "run"),
    plain("I'm curious, what port does postgres listen on by default?", "5432"),
    plain("what does git stash do", "uncommitted", "changes"),
    plain("convert 100 fahrenheit to celsius pls", "37.7", "37.8"),
    plain("how do i make a virtualenv", "venv", "virtualenv"),
    plain(
        "would you mind explaining what pytest is and why people seem to prefer it over unittest?",
        "pytest",
    ),
    plain("difference between == and is in python", "identity", "same object", "identical"),
    plain("can u write a regex that matches an email address", "@"),
    plain("any tips for keeping meeting notes that are actually useful afterwards?"),
    plain("what does the -r in pip install -r do", "requirements", "file"),
    plain("how do i count lines in a file from the terminal", "wc -l"),
    plain("hey hows it going"),
    plain("17*23", "391"),
    plain("what is a csv file, in simple words", "comma"),
    plain("explain what a docstring is", "document"),
    plain(
        "don't look at any of my files, just tell me in general what the difference between "
        "INFO and ERROR log levels is",
        "sever",
        "fail",
        "wrong",
        "problem",
    ),
    plain("how do I merge two dataframes on a common column", "merge"),
    plain("bash one liner to find all .py files under a dir", "find"),
    plain("what does if __name__ == '__main__' actually do", "import", "directly"),
    plain(
        "so my team is debating whether to just use sqlite for a small internal tool instead "
        "of setting up a whole postgres server, its like 5 of us using it. thoughts?",
        "sqlite",
    ),
    plain(
        "suggest a good name for a function that turns a title into a url-friendly string", "slug"
    ),
    plain(
        "in general what does 'Connection refused' mean when an app tries to reach a database",
        "listen",
        "not running",
        "port",
    ),
    plain(
        "without running anything, how would I check which python version I have?",
        "--version",
        "sys.version",
        "-V",
    ),
    plain("and cubed?", "1728", before=("what's 12 squared",)),
    plain(
        "and how do i write it back out without the index column",
        "index=False",
        before=("how do i read a csv with pandas",),
    ),
    plain("can you show a tiny example", "@", before=("explain what a decorator is in python",)),
    plain("ok and a container?", "instance", "running", before=("what's a docker image",)),
    plain("what day was that again?", "Thursday", before=("read notes.txt pls",)),
    plain("is that above 8000?", "yes", before=("what port is set in config.yaml",)),
    plain("what naming pattern should test files follow so pytest picks them up", "test_"),
    plain("write a function that computes the area of a circle given its radius", "pi"),
    plain("how do log files usually get rotated on linux servers", "logrotate"),
    tool(
        "config port?",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "port"},
            "run_shell": {"command": "config.yaml"},
        },
        "8042",
    ),
    tool(
        "when's the review meeting",
        {"read_file": {"path": "notes.txt"}, "search_files": {"path": ANY_PATH}},
        "Thursday",
    ),
    tool(
        "whats on my todo list",
        {"read_file": {"path": "todo.md"}, "run_shell": {"command": "todo.md"}},
        "milk",
    ),
    tool(
        "why did my last cell fail",
        {"last_error": {}, "read_cell": {}, "list_cells": {}},
        "discount",
    ),
    tool(
        "what's threshold set to",
        {
            "describe_variable": {"name": "threshold"},
            "list_notebook_variables": {},
            "run_code": {"code": "threshold"},
        },
        "100",
    ),
    tool(
        "what's in my dataframe",
        {
            "describe_variable": {"name": "sales"},
            "list_notebook_variables": {},
            "run_code": {"code": "sales"},
        },
        "region",
        "north",
    ),
    tool(
        "what python am I on", {"run_shell": {"command": "python"}, "run_code": {"code": "version"}}
    ),
    tool("is numpy installed", {"run_shell": {"command": "numpy"}, "run_code": {"code": "numpy"}}),
    tool(
        "how big is the data file",
        {"run_shell": {"command": "data.csv"}, "read_file": {"path": "data.csv"}},
    ),
    tool(
        "without running anything, what does cleanup.sh delete?",
        {"read_file": {"path": "scripts/cleanup.sh"}, "search_files": {"pattern": "rm"}},
        "build",
    ),
    tool(
        "would you mind checking which version of flask the project pins?",
        {"read_file": {"path": "requirements.txt"}, "search_files": {"pattern": "flask"}},
        "3.0.2",
    ),
    tool(
        "anything weird in the server log?",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "ERROR"},
            "run_shell": {"command": "server.log"},
        },
        "Connection refused",
        "ConnectionRefused",
        "10.0.0.7",
    ),
    tool(
        "which city has the biggest population in data.csv",
        {
            "read_file": {"path": "data.csv"},
            "run_code": {"code": "data.csv"},
            "run_shell": {"command": "data.csv"},
        },
        "Oslo",
    ),
    tool("ls src", {"list_files": {"path": "src"}, "run_shell": {"command": "ls"}}, "app.py"),
    tool(
        "open the second one",
        {"read_file": {"path": "src/utils.py"}},
        "slugify",
        "area",
        before=("what's in the src folder",),
    ),
    tool(
        "what about the tests folder, anything else in there?",
        {"list_files": {"path": "tests"}, "run_shell": {"command": "tests"}},
        "test_app",
        before=("show me src/app.py",),
    ),
    tool(
        "whats the db url in the config",
        {"read_file": {"path": "config.yaml"}, "search_files": {"pattern": "database"}},
        "inventory.db",
    ),
    tool(
        "pls check what ip address the database connection was going to in the log",
        {"read_file": {"path": "logs/server.log"}, "search_files": {"path": ANY_PATH}},
        "10.0.0.7",
    ),
    tool(
        "what does slugify do in my code",
        {"search_files": {"pattern": "slugify"}, "read_file": {"path": "src/utils.py"}},
        "lower",
    ),
    tool(
        "do we have any tests at all in this repo",
        {
            "list_files": {"path": ANY_PATH},
            "search_files": {"pattern": "test"},
            "run_shell": {"command": "test"},
        },
        "test_greet",
        "test_app",
    ),
    tool(
        "how many columns does sales have",
        {
            "describe_variable": {"name": "sales"},
            "run_code": {"code": "sales"},
            "list_notebook_variables": {},
        },
        "4",
        "four",
    ),
    tool(
        "whats the total revenue across all regions",
        {"run_code": {"code": "revenue"}, "describe_variable": {"name": "sales"}},
        "4800",
    ),
    tool("show me cell 4", {"read_cell": {}, "list_cells": {}}, "threshold"),
    tool(
        "what variables do i have defined right now",
        {"list_notebook_variables": {}, "run_code": {"code": "who"}},
        "sales",
        "threshold",
    ),
    tool(
        "grep the code for math imports",
        {"search_files": {"pattern": "math"}, "run_shell": {"command": "math"}},
        "utils",
    ),
    tool(
        "which packages does this project depend on",
        {"read_file": {"path": "requirements.txt"}, "run_shell": {"command": "requirements"}},
        "pandas",
    ),
    tool(
        "what's the requests version constraint in here",
        {"read_file": {"path": "requirements.txt"}, "search_files": {"pattern": "requests"}},
        "2.31",
    ),
    tool(
        "anything left to do in app.py?",
        {"read_file": {"path": "src/app.py"}, "search_files": {"pattern": "TODO"}},
        "farewell",
    ),
    tool("what's the git status of this folder", {"run_shell": {"command": "git"}}),
    tool(
        "what time did the server start according to the log",
        {"read_file": {"path": "logs/server.log"}, "search_files": {"pattern": "start"}},
        "09:14:02",
        "9:14",
    ),
    tool(
        "is the port in config.yaml the same one the log says the server started on?",
        {"read_file": {"path": "config.yaml"}, "search_files": {"path": ANY_PATH}},
        "8042",
    ),
    tool(
        "how many rows does big have",
        {
            "describe_variable": {"name": "big"},
            "run_code": {"code": "big"},
            "list_notebook_variables": {},
        },
        "2",
        "two",
    ),
    tool("can you list all the cells in this notebook", {"list_cells": {}}, "sales"),
    tool(
        "what env vars are set", {"run_shell": {"command": "env"}, "run_code": {"code": "environ"}}
    ),
    tool(
        "find every file that mentions port",
        {"search_files": {"pattern": "port"}, "run_shell": {"command": "port"}},
        "config.yaml",
        "server.log",
    ),
    tool("whats the last item on my todo", {"read_file": {"path": "todo.md"}}, "release notes"),
    tool("read me the app file", {"read_file": {"path": "src/app.py"}}, "Hello"),
    tool(
        "and which of those are actually installed here?",
        {"run_shell": {"command": "pip"}, "run_code": {"code": "version"}},
        before=("what's in requirements.txt",),
    ),
    tool("ok now the todo", {"read_file": {"path": "todo.md"}}, "milk", before=("read notes.txt",)),
    tool(
        "and what's the mean price in sales",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "price"}},
        "10.9375",
        "10.94",
        before=("what's threshold set to?",),
    ),
    tool(
        "the test file imports something, what is it",
        {"read_file": {"path": "tests/test_app.py"}, "search_files": {"pattern": "import"}},
        "greet",
    ),
    tool(
        "so I'm prepping for a meeting tomorrow and I kinda forgot which room it's in, pretty "
        "sure I jotted it down somewhere in this project folder, could you dig it up for me",
        {"read_file": {"path": "notes.txt"}, "search_files": {"path": ANY_PATH}},
        "B12",
    ),
    tool(
        "open up the cleanup script and tell me if its safe to run",
        {"read_file": {"path": "scripts/cleanup.sh"}},
        "build",
        "dist",
    ),
    tool(
        "whats the population of bergen in my data",
        {"read_file": {"path": "data.csv"}, "search_files": {"pattern": "Bergen"}},
        "291000",
        "291,000",
        "291 000",
    ),
    tool(
        "list everything in the project",
        {"list_files": {}, "run_shell": {"command": "ls"}},
        "config.yaml",
    ),
    # Written after the 2026-11-27 stop by a helper who had read neither split nor the rules,
    # from the workspace and the notebook alone (index 197 on); committed before any tuning.
    plain("hey there"),
    tool(
        "whats in teh config",
        {
            "read_file": {"path": "config.yaml"},
            "run_shell": {"command": "config.yaml"},
        },
        "8042",
    ),
    plain("how many km is 26.2 miles", "42"),
    tool(
        "port?",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "port", "path": ANY_PATH},
        },
        "8042",
    ),
    plain("whats 17 times 23", "391"),
    tool(
        "don't run anything, just tell me what cleanup.sh would delete",
        {
            "read_file": {"path": "scripts/cleanup.sh"},
            "search_files": {"pattern": "rm", "path": ANY_PATH},
        },
        "build",
        "dist",
        "egg-info",
    ),
    plain("how do i rename a column in a pandas dataframe", "rename"),
    tool(
        "which python packages does this project pin",
        {
            "read_file": {"path": "requirements.txt"},
            "run_shell": {"command": "requirements"},
        },
        "pandas",
        "flask",
    ),
    plain(
        "what's the shortcut to run a cell in jupyter and jump to the next one",
        "shift",
    ),
    tool(
        "could you have a look at the server log and tell me why it keeps failing?",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "ERROR", "path": ANY_PATH},
            "run_shell": {"command": "server.log"},
        },
        "Connection refused",
        "ConnectionRefused",
        "Errno 111",
        "10.0.0.7",
    ),
    plain(
        "don't look at my files, just tell me in general what a requirements.txt is for",
        "depend",
        "package",
    ),
    tool(
        "where is slugify defined",
        {
            "search_files": {"pattern": "slugify", "path": ANY_PATH},
            "read_file": {"path": "src/utils.py"},
        },
        "utils",
    ),
    plain("git: how do I undo my last commit but keep the changes", "reset"),
    tool(
        "remind me whats still on my todo list",
        {
            "read_file": {"path": "todo.md"},
            "run_shell": {"command": "todo"},
        },
        "milk",
        "domain",
        "release notes",
    ),
    plain("regex that roughly matches an email address?", "@"),
    tool(
        "when's the review meeting again and where",
        {
            "read_file": {"path": "notes.txt"},
            "search_files": {"pattern": "review", "path": ANY_PATH},
        },
        "Thursday",
        "B12",
        "10:00",
    ),
    plain("sql - how to count rows per group", "group by"),
    tool(
        "what's inside the src folder",
        {
            "list_files": {"path": "src"},
            "run_shell": {"command": "ls"},
        },
        "app.py",
        "utils.py",
    ),
    tool(
        "show me what variables i've got in the notebook right now",
        {
            "list_notebook_variables": {},
            "run_code": {},
        },
        "sales",
        "threshold",
        "big",
    ),
    plain("capital of australia?", "canberra"),
    tool(
        "why did my last cell blow up?",
        {
            "last_error": {},
            "read_cell": {"number": "5"},
            "list_cells": {},
        },
        "discount",
        "KeyError",
    ),
    plain("who are you and what kinds of things can you help me with?"),
    tool(
        "total revenue across all regions in sales?",
        {
            "run_code": {"code": "revenue"},
            "describe_variable": {"name": "sales"},
        },
        "4800",
        "4,800",
    ),
    plain("is a list comprehension better than a plain for loop in python? your honest opinion"),
    tool(
        "what code did i put in cell 3",
        {
            "read_cell": {"number": "3"},
            "list_cells": {},
        },
        "revenue",
    ),
    plain(
        "in general, not about my notebook, what does a KeyError mean in python?",
        "key",
    ),
    tool(
        "mean price across the regions?",
        {
            "run_code": {"code": "price"},
            "describe_variable": {"name": "sales"},
        },
        "10.9375",
        "10.94",
    ),
    plain("whats a yaml file", "config", "human", "data"),
    tool(
        "what version of pandas is actually installed here",
        {
            "run_shell": {"command": "pandas"},
            "run_code": {"code": "__version__"},
        },
    ),
    plain("how to sort a dataframe by one column, biggest first", "sort_values", "ascending"),
    tool(
        "which python am i running? the version and where it lives",
        {
            "run_shell": {"command": "python"},
            "run_code": {"code": "sys"},
        },
    ),
    plain("time complexity of binary search?", "log"),
    tool(
        "add a farewell function to src/app.py next to greet",
        {
            "read_file": {"path": "src/app.py"},
            "edit_file": {"path": "src/app.py"},
            "write_file": {"path": "src/app.py"},
        },
    ),
    plain("how many seconds are there in a day", "86400", "86,400", "86 400"),
    tool(
        "put 'call the plumber' on my todo list",
        {
            "read_file": {"path": "todo.md"},
            "edit_file": {"path": "todo.md"},
            "write_file": {"path": "todo.md"},
        },
    ),
    plain(
        "what command would i type in a terminal to see my python version? i'll run it myself",
        "python",
    ),
    tool(
        "insert a cell after cell 4 that plots units by region as a bar chart",
        {
            "insert_cell": {"after": "4"},
            "list_cells": {},
            "read_cell": {"number": "4"},
        },
    ),
    tool(
        "which city in data.csv has the most people",
        {
            "read_file": {"path": "data.csv"},
            "run_code": {"code": "data.csv"},
        },
        "Oslo",
    ),
    plain("what's the difference between == and is in python", "identity", "same object"),
    tool(
        "whats bergens population in my data",
        {
            "read_file": {"path": "data.csv"},
            "search_files": {"pattern": "Bergen", "path": ANY_PATH},
        },
        "291000",
        "291,000",
        "291 000",
    ),
    plain("write me a python function that reverses a string", "[::-1]", "reversed", "reverse"),
    tool(
        "is there a test for greet?",
        {
            "search_files": {"pattern": "greet", "path": ANY_PATH},
            "list_files": {"path": ANY_PATH},
            "read_file": {"path": "tests/test_app.py"},
        },
        "test_greet",
        "test_app",
    ),
    plain("how do i follow a log file live as it grows on linux", "tail"),
    tool(
        "what does the area function do exactly",
        {
            "read_file": {"path": "src/utils.py"},
            "search_files": {"pattern": "area", "path": ANY_PATH},
        },
        "pi",
        "radius",
    ),
    plain("whats 15% of 80", "12"),
    tool(
        "and the requirements file?",
        {
            "read_file": {"path": "requirements.txt"},
            "run_shell": {"command": "requirements"},
        },
        "pandas",
        "flask",
        "requests",
        before=("what does the readme say?",),
    ),
    plain("translate 'good night' into french", "bonne nuit"),
    tool(
        "ok now check the log",
        {
            "read_file": {"path": "logs/server.log"},
            "list_files": {"path": "logs"},
            "search_files": {"path": ANY_PATH},
        },
        "ERROR",
        "refused",
        before=("what's in notes.txt",),
    ),
    plain("can you explain what a merge conflict is in git, like i'm five", "conflict"),
    tool(
        "according to the config which database does the app talk to",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "database", "path": ANY_PATH},
        },
        "sqlite",
        "inventory.db",
    ),
    plain("how to drop rows that have NaN in a pandas df", "dropna"),
    tool(
        "so I came back from lunch and the server wasn't up, my colleague muttered something "
        "about the database, no idea really. could you dig through whatever log we have and "
        "tell me what happened and what address it was trying?",
        {
            "read_file": {"path": "logs/server.log"},
            "list_files": {"path": ANY_PATH},
            "search_files": {"path": ANY_PATH},
        },
        "10.0.0.7",
    ),
    plain("what does the -p flag do for mkdir", "parent"),
    tool(
        "list everything in here",
        {
            "list_files": {},
            "run_shell": {"command": "ls"},
        },
        "README",
        "config.yaml",
        "requirements",
    ),
    plain(
        "how would i find every file ending in .log under some folder from the shell",
        "find",
        "glob",
    ),
    tool(
        "any TODOs left in the code?",
        {
            "search_files": {"pattern": "TODO", "path": ANY_PATH},
            "read_file": {"path": "src/app.py"},
        },
        "farewell",
    ),
    plain(
        "thinking of learning rust or go next, mostly for small cli tools. which would you pick?"
    ),
    tool(
        "can u run the tests",
        {
            "run_shell": {"command": "test"},
            "run_code": {"code": "test"},
        },
    ),
    plain("what does `if __name__ == '__main__':` actually do", "import", "directly"),
    tool(
        "what's the shape of the sales dataframe",
        {
            "describe_variable": {"name": "sales"},
            "run_code": {"code": "shape"},
        },
        "(4, 4)",
        "4 rows",
        "four rows",
    ),
    plain("how do I pin an exact package version with pip", "=="),
    tool(
        "show me the code of the cell where threshold got set",
        {
            "read_cell": {"number": "4"},
            "list_cells": {},
        },
        "100",
    ),
    plain("list vs tuple, whats the actual difference", "immutable", "mutable", "change"),
    tool(
        "which region sold the most units",
        {
            "run_code": {"code": "units"},
            "describe_variable": {"name": "sales"},
        },
        "east",
    ),
    plain(
        "I'm new to jupyter and keep getting confused: when I run a cell the number in the "
        "brackets on the left changes. what does that number mean? not my notebook "
        "specifically, just in general",
        "execution",
        "order",
        "run",
    ),
    tool(
        "fix cell 5 so it stops crashing, just use price instead of discount",
        {
            "edit_cell": {"cell": "5"},
            "read_cell": {"number": "5"},
            "list_cells": {},
        },
    ),
    plain("what port does https use by default", "443"),
    tool(
        "I wonder whether debug mode is switched on in this project, could you check?",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "debug", "path": ANY_PATH},
        },
        "false",
        "off",
        "not",
    ),
    plain(
        "is there a magic command that lists the variables in a jupyter session?", "%who", "whos"
    ),
    tool(
        "what's in the scripts folder and what does it do",
        {
            "list_files": {"path": "scripts"},
            "read_file": {"path": "scripts/cleanup.sh"},
        },
        "cleanup",
    ),
    plain(
        "cool. unrelated: how do i make a checkbox list in markdown?",
        "[ ]",
        before=("what's in todo.md",),
    ),
    tool(
        "how much revenue did north bring in",
        {
            "run_code": {"code": "north"},
            "describe_variable": {"name": "sales"},
        },
        "1140",
        "1,140",
    ),
    plain(
        "thanks! and generally speaking, what's postgres's default port?",
        "5432",
        before=("what port is the server on?",),
    ),
    tool(
        "and the other file in src?",
        {
            "read_file": {"path": "src/utils.py"},
            "list_files": {"path": "src"},
        },
        "area",
        "slugify",
        before=("what's in src/app.py",),
    ),
    plain("thx, that helped a lot"),
    tool(
        "what columns does sales have",
        {
            "describe_variable": {"name": "sales"},
            "run_code": {"code": "columns"},
            "list_notebook_variables": {},
        },
        "revenue",
    ),
    # Third batch of fresh cases (2026-11-27), written by someone who had read neither split nor
    # the rules, to the kinds: negated asks, follow-ups, the live notebook, files named
    # by description, indirect asks, typos (index 273 on); committed before any tuning on them.
    tool(
        "dont run it!! just tell me what scripts/cleanup.sh would wipe",
        {"read_file": {"path": "scripts/cleanup.sh"}},
        "dist",
        "egg-info",
    ),
    tool(
        "without running pytest, what's the one test actually asserting",
        {
            "read_file": {"path": "tests/test_app.py"},
            "list_files": {"path": "tests"},
            "search_files": {"pattern": "assert", "path": ANY_PATH},
        },
        "Hello, Ada",
        "Ada",
    ),
    tool(
        "no need to touch the notebook, just what's on my todo list?",
        {"read_file": {"path": "todo.md"}},
        "milk",
        "domain",
        "release notes",
    ),
    tool(
        'i don\'t want you executing anything — what would greet("Bob") give back, '
        "going by the code",
        {
            "read_file": {"path": "src/app.py"},
            "search_files": {"pattern": "greet", "path": ANY_PATH},
        },
        "Hello, Bob",
    ),
    tool(
        "without changing anything, which of our packages are pinned exactly and which are loose",
        {"read_file": {"path": "requirements.txt"}},
        "2.1.4",
        "3.0.2",
        "2.31",
    ),
    tool(
        "don't fix it yet, just where's the TODO sitting in the source code",
        {
            "search_files": {"pattern": "TODO", "path": ANY_PATH},
            "read_file": {"path": "src/app.py"},
            "list_files": {"path": "src"},
        },
        "app.py",
        "farewell",
    ),
    tool(
        "don't restart anything, just read me why the server fell over",
        {
            "read_file": {"path": "logs/server.log"},
            "list_files": {"path": "logs"},
            "search_files": {"pattern": "ERROR", "path": ANY_PATH},
        },
        "Connection refused",
        "Errno 111",
        "10.0.0.7",
    ),
    tool(
        "is there a test for it?",
        {
            "list_files": {"path": ANY_PATH},
            "read_file": {"path": "tests/test_app.py"},
            "search_files": {"pattern": "slugify", "path": ANY_PATH},
        },
        "greet",
        before=("what does slugify do",),
    ),
    tool(
        "ok and did it actually come up? anything weird in the logs",
        {
            "read_file": {"path": "logs/server.log"},
            "list_files": {"path": "logs"},
            "search_files": {"path": ANY_PATH},
        },
        "Connection refused",
        "refused",
        "ERROR",
        before=("which port is the server configured for?",),
    ),
    tool(
        "and big? how many rows made it in",
        {
            "describe_variable": {"name": "big"},
            "list_notebook_variables": {},
        },
        "2 rows",
        "two",
        before=("show me the sales df",),
    ),
    tool(
        "and the db it talks to?",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"path": ANY_PATH},
        },
        "inventory.db",
        "sqlite",
        before=("what python deps does this project have",),
    ),
    tool(
        "and when's that meeting i'm supposed to prep for",
        {
            "read_file": {"path": "notes.txt"},
            "search_files": {"pattern": "meeting", "path": ANY_PATH},
        },
        "Thursday",
        "10:00",
        before=("what's on my todo list?",),
    ),
    tool(
        "and the readme, does it say how to build at all?",
        {"read_file": {"path": "README.md"}},
        "Demo project",
        "tiny",
        before=("what does the cleanup script remove?",),
    ),
    tool(
        "does utils have anything like that?",
        {
            "read_file": {"path": "src/utils.py"},
            "search_files": {"path": ANY_PATH},
        },
        "slugify",
        "area",
        before=("what does greet() in src/app.py return",),
    ),
    tool(
        "ugh that last cell died, what happened",
        {"last_error": {}, "read_cell": {}},
        "KeyError",
        "discount",
    ),
    tool(
        "whats threshold at rn",
        {
            "describe_variable": {"name": "threshold"},
            "list_notebook_variables": {},
        },
        "100",
    ),
    tool(
        "which vars do i have defined in the kernel atm",
        {"list_notebook_variables": {}},
        "threshold",
        "big",
    ),
    tool(
        "how much revenue did east bring in, per my sales frame",
        {"describe_variable": {"name": "sales"}},
        "1740",
        "1,740",
    ),
    tool(
        "remind me what cell 3 did",
        {"read_cell": {"number": "3"}},
        "revenue",
    ),
    tool(
        "is there a discount column in sales or did i imagine that",
        {
            "describe_variable": {"name": "sales"},
            "last_error": {},
            "list_notebook_variables": {},
        },
        "revenue",
        "KeyError",
        "isn't",
        "no discount",
        "doesn't",
    ),
    tool(
        "in the df, which region moved the fewest units",
        {
            "describe_variable": {"name": "sales"},
            "list_notebook_variables": {},
        },
        "west",
    ),
    tool(
        "that yaml thing — is debug on?",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "debug", "path": ANY_PATH},
        },
        "false",
        "off",
    ),
    tool(
        "that shell script we have, is it dangerous to run",
        {
            "read_file": {"path": "scripts/cleanup.sh"},
            "list_files": {"path": ANY_PATH},
        },
        "rm -rf",
        "build",
    ),
    tool(
        "our deps, are we on a reasonably new requests?",
        {
            "read_file": {"path": "requirements.txt"},
            "search_files": {"pattern": "requests", "path": ANY_PATH},
        },
        "2.31",
    ),
    tool(
        "the meeting notes, which room was it again",
        {
            "read_file": {"path": "notes.txt"},
            "search_files": {"path": ANY_PATH},
        },
        "B12",
    ),
    tool(
        "the city numbers file — who's smallest",
        {"read_file": {"path": "data.csv"}},
        "Trondheim",
    ),
    tool(
        "the helpers module, how does it work out the area",
        {
            "read_file": {"path": "src/utils.py"},
            "search_files": {"pattern": "area", "path": ANY_PATH},
        },
        "pi",
        "radius",
    ),
    tool(
        "the entry-point python file, what functions does it define",
        {
            "read_file": {"path": "src/app.py"},
            "list_files": {"path": "src"},
            "search_files": {"pattern": "def", "path": ANY_PATH},
        },
        "greet",
    ),
    tool(
        "i wonder if writing the release notes is still on our list somewhere",
        {
            "read_file": {"path": "todo.md"},
            "search_files": {"pattern": "release", "path": ANY_PATH},
        },
        "todo",
    ),
    tool(
        "could you maybe check whether the app has a farewell function yet",
        {
            "read_file": {"path": "src/app.py"},
            "search_files": {"pattern": "farewell", "path": ANY_PATH},
        },
        "TODO",
        "not yet",
    ),
    tool(
        "kinda doubt the readme has setup instructions but can u peek",
        {"read_file": {"path": "README.md"}},
        "tiny project",
        "Demo",
    ),
    tool(
        "would be nice to know if bergen beats trondheim population-wise in our data",
        {
            "read_file": {"path": "data.csv"},
            "search_files": {"path": ANY_PATH},
        },
        "291000",
        "291,000",
        "212000",
        "212,000",
    ),
    tool(
        "curious whether anything in the code actually uses requests",
        {
            "search_files": {"path": ANY_PATH},
            "list_files": {"path": ANY_PATH},
        },
        "requirements",
        "doesn't",
        "does not",
        "no code",
    ),
    tool(
        "just wondering if there are any log files lying around",
        {
            "list_files": {"path": ANY_PATH},
            "search_files": {"path": ANY_PATH},
        },
        "server.log",
    ),
    tool(
        "wich pandas verison do we pin",
        {
            "read_file": {"path": "requirements.txt"},
            "search_files": {"pattern": "pandas", "path": ANY_PATH},
        },
        "2.1.4",
    ),
    tool(
        "db ip pls, from teh logs",
        {
            "read_file": {"path": "logs/server.log"},
            "list_files": {"path": "logs"},
            "search_files": {"path": ANY_PATH},
        },
        "10.0.0.7",
    ),
    tool(
        "oslo pop?? in the csv",
        {
            "read_file": {"path": "data.csv"},
            "search_files": {"path": ANY_PATH},
        },
        "709000",
        "709,000",
    ),
    tool(
        "waht port r we servin on per teh config",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "port", "path": ANY_PATH},
        },
        "8042",
    ),
    tool(
        "hw many things r on the todo",
        {"read_file": {"path": "todo.md"}},
        "3",
        "three",
    ),
    tool(
        "slugfy func wat does it do exactly",
        {
            "read_file": {"path": "src/utils.py"},
            "search_files": {"pattern": "slug", "path": ANY_PATH},
        },
        "lower",
        "hyphen",
        "dash",
    ),
    plain("whats 17 x 23", "391"),
    plain("capital of australia? always forget", "Canberra"),
    plain("wat does http 404 mean", "not found"),
    plain("convert 100 farenheit to celcius pls", "37.7", "37.8"),
    plain("15% of 80?", "12"),
    plain("how many seconds in a day", "86400", "86,400", "86 400"),
    plain("how do i follow a log file live in linux as new lines come in", "tail"),
    plain("whats a sane folder layout for a small python package", "pyproject", "__init__", "src"),
    plain("how can i see which process is hogging port 8080 on my mac", "lsof"),
    plain("how do i load a yaml config file in python", "safe_load", "yaml.load", "PyYAML"),
    plain("in git how do i ignore all .log files", ".gitignore"),
    plain("bash one-liner to delete files older than 7 days in some dir?", "find", "-mtime"),
    plain("how do i make a shell script executable", "chmod"),
    plain("don't check anything, what does csv stand for", "comma"),
    plain("without opening anything, whats postgres' default port", "5432"),
    plain(
        "dont look at the workspace, just in general how do you write a pytest test",
        "assert",
        "def test_",
    ),
    plain("no tools pls. diff between a list and a tuple in python?", "immutable", "mutable"),
    plain(
        "don't open the notebook, just explain what a KeyError usually means in pandas",
        "column",
        "key",
    ),
    plain("without reading any files: what does rm -rf actually do", "recurs", "force"),
    plain(
        "no need to look at my setup — what's the difference between == and >= in a "
        "requirements file",
        "exact",
        "minimum",
        "at least",
    ),
    plain("thanks that helped a ton"),
    plain("lol ok you're pretty quick"),
    plain("gn, talk tmrw"),
    plain("sorry for all the questions today"),
    plain("and a string?", "[::-1]", "reversed", before=("how do i reverse a list in python",)),
    plain("and sweden?", "Stockholm", before=("what's the capital of norway",)),
    plain("and words?", "wc -w", "-w", before=("how do i count lines in a file on linux",)),
    plain(
        "thanks! how long is 10:00 to 11:30 btw",
        "90",
        "1.5",
        "hour and a half",
        "1 hour 30",
        "one and a half",
        before=("where is the review meeting?",),
    ),
    plain(
        "what's an egg-info folder anyway?",
        "metadata",
        before=("what does the cleanup script delete?",),
    ),
    plain(
        "generally, is it better to pin exact versions or use ranges?",
        "reproduc",
        "pin",
        before=("what version of flask are we on",),
    ),
    plain(
        "what's the highest port number that's even valid?",
        "65535",
        "65,535",
        before=("which port does the server use",),
    ),
    plain("pandas keeps cutting my columns off with ..., how do i see them all", "max_columns"),
    plain("jupyter shortcut to run a cell and add a new one below?", "Alt", "Option"),
    plain("how do i restart the kernel in jupyter without closing the tab", "Kernel", "0, 0"),
    plain("quick groupby sum example in pandas?", "groupby"),
    plain("loc vs iloc, whats the difference", "label", "position", "integer"),
    plain("how to time how long a cell takes in a notebook", "%%time", "%timeit", "%time"),
    plain("how do i drop rows with NaN in a dataframe", "dropna"),
    # Fourth batch of fresh cases (2026-11-27, index 351 on), written by a helper who had read
    # neither split nor the rules, from the workspace and the notebook alone: follow-ups that
    # turn to another file, plain follow-ups after a turn that looked, questions that only
    # mention files. Committed before any run on them.
    tool(
        "what room's the review meeting in? it's in my notes somewhere",
        {
            "read_file": {"path": "notes.txt"},
            "search_files": {"pattern": "review", "path": ANY_PATH},
        },
        "B12",
    ),
    tool(
        "which db file does the app point at? should be in the yaml",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "datab", "path": ANY_PATH},
        },
        "inventory.db",
    ),
    tool(
        "server wont start, can u look at the log and tell me why",
        {"read_file": {"path": "logs/server.log"}, "search_files": {"path": ANY_PATH}},
        "Connection refused",
        "ConnectionRefused",
        "Errno 111",
        "10.0.0.7",
    ),
    tool(
        "waht version of flask are we pinned to",
        {
            "read_file": {"path": "requirements.txt"},
            "search_files": {"pattern": "lask", "path": ANY_PATH},
        },
        "3.0.2",
    ),
    tool(
        "could you maybe check the csv and tell me which city has the fewest people",
        {"read_file": {"path": "data.csv"}},
        "Trondheim",
    ),
    tool(
        "what lives in the scripts dir",
        {"list_files": {"path": "scripts"}, "read_file": {"path": "scripts/cleanup.sh"}},
        "cleanup",
    ),
    tool(
        "don't run it, just tell me what the cleanup script would delete",
        {
            "read_file": {"path": "scripts/cleanup.sh"},
            "search_files": {"pattern": "rm", "path": ANY_PATH},
        },
        "build",
        "dist",
        "egg-info",
    ),
    tool(
        "without executing anything, what is the unit test actually checking?",
        {
            "read_file": {"path": "tests/test_app.py"},
            "list_files": {"path": "tests"},
            "search_files": {"pattern": "test", "path": ANY_PATH},
        },
        "Hello, Ada",
        "greet",
    ),
    tool(
        "i wonder if anyone ever got around to writing a farewell function in src",
        {
            "search_files": {"pattern": "farewell", "path": ANY_PATH},
            "read_file": {"path": "src/app.py"},
            "list_files": {"path": "src"},
        },
        "TODO",
        "no farewell",
        "not yet",
        "doesn't",
        "does not",
        "isn't",
        "hasn't",
    ),
    tool(
        "what columns does sales have",
        {"describe_variable": {"name": "sales"}},
        "revenue",
    ),
    tool(
        "what went wrong in my last cell?",
        {"last_error": {}},
        "discount",
        "KeyError",
    ),
    tool(
        "what variables have i got in the kernel rn",
        {"list_notebook_variables": {}},
        "sales",
        "threshold",
    ),
    tool(
        "how many rows ended up in big",
        {"describe_variable": {"name": "big"}, "list_notebook_variables": {}},
        "2",
        "two",
    ),
    tool(
        "which region brought in the most revenue in my dataframe",
        {"describe_variable": {"name": "sales"}},
        "east",
        "1740",
    ),
    tool(
        "how many open items are in todo.md",
        {"read_file": {"path": "todo.md"}},
        "3",
        "three",
    ),
    tool(
        "i was wondering which ip the database was sitting at when the connection failed",
        {"read_file": {"path": "logs/server.log"}, "search_files": {"path": ANY_PATH}},
        "10.0.0.7",
    ),
    tool(
        "wheres the greet funtion defined",
        {
            "search_files": {"pattern": "greet", "path": ANY_PATH},
            "read_file": {"path": "src/app.py"},
        },
        "app.py",
    ),
    tool(
        "lsit the files in src pls",
        {"list_files": {"path": "src"}},
        "utils.py",
        "app.py",
    ),
    tool(
        "no need to run anything, just find where math gets imported",
        {
            "search_files": {"pattern": "math", "path": ANY_PATH},
            "read_file": {"path": "src/utils.py"},
        },
        "utils.py",
    ),
    tool(
        "hwo many cities r in the data file",
        {"read_file": {"path": "data.csv"}},
        "3",
        "three",
    ),
    tool(
        "and what port did the log say it actually started on?",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "port", "path": ANY_PATH},
        },
        "8042",
        before=("what port does the config use",),
    ),
    tool(
        "ok now check whether the test imports anything from utils",
        {"read_file": {"path": "tests/test_app.py"}, "search_files": {"path": ANY_PATH}},
        "greet",
        "src.app",
        before=("what version of pandas is pinned",),
    ),
    tool(
        "what about the readme, what's the project called?",
        {"read_file": {"path": "README.md"}},
        "Demo project",
        before=("show me the todo file",),
    ),
    tool(
        "and in the notebook's sales frame, which region sold the fewest units?",
        {"describe_variable": {"name": "sales"}},
        "west",
        before=("which city in data.csv is smallest",),
    ),
    tool(
        "what about the utils module, what functions are in there",
        {
            "read_file": {"path": "src/utils.py"},
            "search_files": {"pattern": "def", "path": ANY_PATH},
        },
        "slugify",
        "area",
        before=("does src/app.py have any todos",),
    ),
    tool(
        "ok now the log, when did it start retrying?",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "retr", "path": ANY_PATH},
        },
        "09:15:40",
        "9:15",
        before=("how many rows does data.csv have",),
    ),
    plain("quick q, how do i load a csv into a pandas dataframe", "read_csv"),
    plain("whats 17 * 23", "391"),
    plain("diff between a list and a tuple in python?", "mutable"),
    plain("in yaml how do you write a list again, syntax-wise", "- ", "dash", "hyphen", "["),
    plain("how do i run just one test with pytest", "-k", "::"),
    plain("git: undo my last commit but keep the changes?", "reset", "--soft"),
    plain("don't look at my files, just tell me what http 404 means", "not found"),
    plain("without checking anything in the workspace - what's postgres' default port?", "5432"),
    plain("how do i follow a log file live in the terminal", "-f", "follow"),
    plain("72 fahrenheit in celsius?", "22.2", "22"),
    plain("what do the -r and -f flags on rm do", "recursive", "force"),
    plain("what sections should a good README have, generally", "install", "usage"),
    plain("in general what causes a KeyError in python", "dict", "missing", "exist"),
    plain("shortcut to run a cell in jupyter?", "shift"),
    plain("what's 15% of 240", "36"),
    plain(
        "and in general which ports need root on linux?",
        "1024",
        before=("what port is set in the yaml",),
    ),
    plain(
        "and what does errno 111 usually mean, generally speaking?",
        "refused",
        "ECONNREFUSED",
        before=("check the server log for errors",),
    ),
    plain(
        "and if i want to keep the last one instead?",
        "keep=",
        "keep =",
        before=("how do i drop duplicate rows in pandas",),
    ),
    # Fifth batch of fresh cases (2026-11-27, index 395 on), written by a helper who had read
    # neither split nor the rules, from the workspace and the notebook alone: indirect asks,
    # typos, negated asks, follow-ups that turn to another file or the notebook, questions
    # about the live notebook's values. Committed before any run on them.
    # --- tool cases: workspace ---
    tool(
        "is debug switched on or off in config.yaml?",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "debug", "path": ANY_PATH},
        },
        "false",
    ),
    tool(
        "which libraries does this project depend on? just list em with versions",
        {"read_file": {"path": "requirements.txt"}},
        "requests",
        "2.1.4",
        "3.0.2",
    ),
    tool(
        "without changing anything, explain what slugify does to a string",
        {
            "read_file": {"path": "src/utils.py"},
            "search_files": {"pattern": "slug", "path": ANY_PATH},
        },
        "lower",
        "hyphen",
        "dash",
    ),
    tool(
        "when is the review meeting again? day + time pls",
        {"read_file": {"path": "notes.txt"}, "search_files": {"path": ANY_PATH}},
        "Thursday",
        "10:00",
    ),
    tool(
        "grep the code for todo comments for me",
        {
            "search_files": {"pattern": "todo", "path": ANY_PATH},
            "read_file": {"path": "src/app.py"},
        },
        "farewell",
    ),
    tool(
        "don't run anything, just read server.log: at what time did the error hit?",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "error", "path": ANY_PATH},
        },
        "09:14:05",
    ),
    tool(
        "how is area calculated in my utils file? whats the formula",
        {
            "read_file": {"path": "src/utils.py"},
            "search_files": {"pattern": "area", "path": ANY_PATH},
        },
        "math.pi",
        "π",
        "pi *",
        "pi times",
        "radius ** 2",
        "radius**2",
    ),
    tool(
        "hmm does our readme say anything about how to install it?",
        {"read_file": {"path": "README.md"}},
        "tiny project",
        "demo project",
        "evaluation",
    ),
    tool(
        "gimme an overview of every file in this workspace",
        {"list_files": {}},
        "config.yaml",
        "requirements.txt",
        "notes.txt",
        "cleanup.sh",
    ),
    tool(
        "I wonder if any of my files mention sqlite at all",
        {
            "search_files": {"pattern": "sqlite", "path": ANY_PATH},
            "read_file": {"path": "config.yaml"},
        },
        "config.yaml",
        "inventory.db",
    ),
    # --- tool cases: live notebook ---
    tool(
        "what's the mean price in the sales df?",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "price"}},
        "10.9375",
        "10.94",
        "10.938",
    ),
    tool(
        "total units sold across every region in my sales table?",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "units"}},
        "505",
    ),
    tool(
        "the last cell blew up — which key was it trying to find?",
        {"last_error": {}, "read_cell": {}},
        "discount",
    ),
    tool(
        "which regions made it into big",
        {"describe_variable": {"name": "big"}, "run_code": {"code": "big"}},
        "north",
        "east",
    ),
    tool(
        "what dtype did pandas give the price column of sales",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "sales"}},
        "float64",
        "float",
    ),
    tool(
        "no need to rerun anything, how much revenue came from the west region in my notebook?",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "sales"}},
        "900",
    ),
    # --- tool cases: follow-ups ---
    tool(
        "and does anything test it?",
        {
            "read_file": {"path": "tests/test_app.py"},
            "search_files": {"pattern": "greet", "path": ANY_PATH},
            "list_files": {"path": "tests"},
        },
        "test_greet",
        "test_app",
        before=("where does greet get defined?",),
    ),
    tool(
        "k. and what does the log say happened at 09:15?",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "09:15", "path": ANY_PATH},
        },
        "retrying",
        "retry",
        before=("is debug on in the config?",),
    ),
    tool(
        "ok now the notebook — what's threshold equal to?",
        {
            "describe_variable": {"name": "threshold"},
            "list_notebook_variables": {},
            "run_code": {"code": "threshold"},
        },
        "100",
        before=("what's in todo.md",),
    ),
    tool(
        "what about utils.py, anything in there besides area?",
        {
            "read_file": {"path": "src/utils.py"},
            "search_files": {"pattern": "def", "path": ANY_PATH},
        },
        "slugify",
        before=("show me what's in src/app.py",),
    ),
    tool(
        "cool. over in my sales dataframe, which region has the highest unit price?",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "price"}},
        "west",
        before=("how many cities are listed in data.csv?",),
    ),
    tool(
        "is that ip mentioned in the config too?",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "10.0.0", "path": ANY_PATH},
        },
        "not",
        "n't",
        before=("can you check the server log for errors?",),
    ),
    # --- plain cases ---
    plain("what's a Makefile generally used for?", "target", "build", "compile"),
    plain("how would i read a log file line by line in python", "open(", "with open"),
    plain("whats 2 to the power of 10", "1024"),
    plain(
        "how can i tell which git branch im currently on", "git branch", "git status", "rev-parse"
    ),
    plain("in pandas, how do I get rid of rows that have missing values?", "dropna"),
    plain("what does chmod +x do to a file?", "execut"),
    plain("how many seconds are there in one day", "86400", "86,400"),
    plain("what is a .gitignore file for, in general", "ignore", "untrack"),
    plain("which magic command times a line of code in a jupyter notebook?", "timeit"),
    plain("explain python virtual environments to me in a couple sentences", "venv", "isolat"),
    plain("from the terminal, how do you count the lines in a file?", "wc"),
    plain("what does git stash do", "uncommitted", "temporar", "working"),
    plain("sort a list of dicts by one key in python?", "sorted", "key=", "itemgetter", ".sort("),
    plain(
        "in general, what does turning on debug mode do in flask?",
        "reload",
        "debugger",
        "traceback",
        before=("read config.yaml for me",),
    ),
    # --- batch 6 (2026-11-28): fresh phrasings, run once on the unchanged code first ---
    tool(
        "hey what version of flask does my requirements file ask for",
        {
            "read_file": {"path": "requirements.txt"},
            "search_files": {"pattern": "flask", "path": ANY_PATH},
        },
        "3.0.2",
    ),
    tool(
        "remind me which room we're meeting in",
        {"read_file": {"path": "notes.txt"}, "search_files": {"path": ANY_PATH}},
        "B12",
    ),
    tool(
        "has anyone written the farewell thing in app.py yet or is it still a todo",
        {"read_file": {"path": "src/app.py"}, "search_files": {"path": ANY_PATH}},
        "TODO",
        "not",
        "no ",
    ),
    tool(
        "the csv, how many cities are in it",
        {"read_file": {"path": "data.csv"}},
        "3",
        "three",
    ),
    tool(
        "are there any errors logged",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "error", "path": ANY_PATH},
        },
        "Connection refused",
        "Errno 111",
        "ConnectionRefused",
    ),
    tool(
        "what have we got in scripts/",
        {"list_files": {"path": "scripts"}},
        "cleanup.sh",
    ),
    tool(
        "quick check, is debug enabled in our config",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "debug", "path": ANY_PATH},
        },
        "false",
        "not",
        "disabled",
    ),
    tool(
        "what's still on the todo",
        {"read_file": {"path": "todo.md"}},
        "milk",
    ),
    tool(
        "what's the title in the readme",
        {"read_file": {"path": "README.md"}},
        "Demo project",
    ),
    tool(
        "which tests do we have",
        {
            "list_files": {"path": ANY_PATH},
            "search_files": {"path": ANY_PATH},
            "read_file": {"path": "tests/test_app.py"},
        },
        "test_greet",
        "test_app",
    ),
    tool(
        "which file pulls in the math module",
        {
            "search_files": {"pattern": "math", "path": ANY_PATH},
            "read_file": {"path": "src/utils.py"},
        },
        "utils",
    ),
    tool(
        "print out my sales frame",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "sales"}},
        "north",
    ),
    tool(
        "threshold is what right now?",
        {"describe_variable": {"name": "threshold"}},
        "100",
    ),
    tool(
        "my notebook threw an error, what was it",
        {"last_error": {}},
        "discount",
        "KeyError",
    ),
    tool(
        "big has how many rows now?",
        {"describe_variable": {"name": "big"}, "run_code": {"code": "big"}},
        "2",
        "two",
    ),
    tool(
        "show me what's in the 2nd cell",
        {"read_cell": {"number": "2"}},
        "DataFrame",
        "region",
    ),
    tool(
        "add up the units column of sales for me",
        {"run_code": {"code": "units"}},
        "505",
    ),
    tool(
        "where is the domain renewal mentioned",
        {"search_files": {"pattern": "domain", "path": ANY_PATH}, "read_file": {"path": "todo.md"}},
        "todo.md",
    ),
    tool(
        "when did the server start retrying, per the log",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "retr", "path": ANY_PATH},
        },
        "09:15:40",
        "9:15",
    ),
    tool(
        "what would the cleanup script wipe if i ran it? don't run it",
        {"read_file": {"path": "scripts/cleanup.sh"}},
        "build",
        "dist",
    ),
    tool(
        "what db is configured",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "database", "path": ANY_PATH},
        },
        "inventory.db",
        "sqlite",
    ),
    tool(
        "what's imported at the top of utils.py",
        {"read_file": {"path": "src/utils.py"}},
        "math",
    ),
    tool(
        "how do our tests check greet",
        {
            "read_file": {"path": "tests/test_app.py"},
            "search_files": {"pattern": "greet", "path": ANY_PATH},
        },
        "Ada",
    ),
    tool(
        "anything in my notes about the review",
        {
            "read_file": {"path": "notes.txt"},
            "search_files": {"pattern": "review", "path": ANY_PATH},
        },
        "Thursday",
    ),
    tool(
        "which variables have i defined so far",
        {"list_notebook_variables": {}},
        "sales",
        "threshold",
    ),
    tool(
        "what's sitting in the logs dir",
        {"list_files": {"path": "logs"}},
        "server.log",
    ),
    tool(
        "trondheim's population according to the data file?",
        {
            "read_file": {"path": "data.csv"},
            "search_files": {"pattern": "trondheim", "path": ANY_PATH},
        },
        "212000",
        "212,000",
    ),
    tool(
        "show me requirements.txt",
        {"read_file": {"path": "requirements.txt"}},
        "pandas",
    ),
    tool(
        "what's the revenue for north in my sales df",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "revenue"}},
        "1140",
    ),
    tool(
        "find every place 8042 shows up",
        {"search_files": {"pattern": "8042", "path": ANY_PATH}},
        "config.yaml",
    ),
    tool(
        "everything under tests/, list it",
        {"list_files": {"path": "tests"}},
        "test_app.py",
    ),
    tool(
        "is requests pinned to an exact version?",
        {
            "read_file": {"path": "requirements.txt"},
            "search_files": {"pattern": "requests", "path": ANY_PATH},
        },
        ">=",
        "minimum",
        "at least",
    ),
    tool(
        "what address was the database at when the connection failed",
        {"read_file": {"path": "logs/server.log"}, "search_files": {"path": ANY_PATH}},
        "10.0.0.7",
    ),
    tool(
        "open config.yaml, what port",
        {"read_file": {"path": "config.yaml"}},
        "8042",
    ),
    tool(
        "what does my last cell say",
        {"read_cell": {"number": "5"}, "list_cells": {}, "last_error": {}},
        "discount",
    ),
    tool(
        "in sales which region has the priciest item",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "price"}},
        "west",
    ),
    tool(
        "ugh, the cell before this one crashed, why",
        {"last_error": {}},
        "KeyError",
        "discount",
    ),
    # plain, though they name files, commands or the notebook
    plain("what's the point of a .gitignore", "ignore", "untrack"),
    plain("with ls, how do i see hidden files", "-a"),
    plain("generally speaking, what does rm -rf do", "remov", "delet"),
    plain("how do people usually pin a version in a requirements.txt", "=="),
    plain("what is YAML, briefly", "YAML", "data", "config"),
    plain("how can I see which python version I have from a terminal", "--version", "-V"),
    plain("what's a csv file", "comma"),
    plain("how do i show just the last 20 lines of a log file", "tail"),
    plain("what does pip freeze print", "install", "package"),
    plain("on linux, how do i find what's using port 8080", "lsof", "ss ", "netstat", "fuser"),
    plain("what's the difference between a jupyter cell and a script", "cell", "script"),
    plain("whats 45 divided by 9", "5"),
    # Fresh phrasings written after the run on 4c2847d to find what the rules missed (a how-to
    # that wrote a config file, a default read from the workspace, answers given unread):
    # tuned on, so dev only.
    # plain, mentioning files / commands / notebook / settings in general
    plain("what's the usual way to structure a config.yaml for a flask app", "yaml"),
    plain("why would someone put a shebang line at the top of a script", "interpreter", "#!"),
    plain("what's the difference between a .txt and a .md file", "markdown"),
    plain("what does the tail command do", "end", "last"),
    plain("is it bad practice to commit a .env file", "secret", "yes"),
    plain("what's a log level", "debug", "info", "error"),
    plain("what usually goes in a todo.md file", "task"),
    plain("whats the default port for flask", "5000"),
    plain("how are python packages versioned, what does 2.1.4 mean", "major", "patch"),
    plain("what is sqlite good for", "embedded", "file", "lightweight"),
    plain("in a notebook, what does the asterisk next to a cell mean", "running", "execut"),
    plain("why does my jupyter kernel keep dying when I load big files", "memory", "RAM"),
    plain(
        "what's the difference between a kernel restart and interrupt",
        "stop",
        "memory",
        "variables",
    ),
    plain("how would I check which packages are installed in a venv", "pip list", "pip freeze"),
    plain("what's a Dockerfile", "image", "container"),
    plain("do I need a requirements.txt if I use pyproject.toml", "depend"),
    plain(
        "what does ERRNO 111 connection refused usually mean", "listening", "refused", "not running"
    ),
    plain("what does the rm -rf build/ line do in a cleanup script", "delet", "remov"),
    plain("is pandas or polars faster", "polars"),
    plain("what should a good commit message look like", "imperative", "summary", "short"),
    plain("can you explain what df.describe() gives you", "mean", "count"),
    plain("whats the syntax for an f-string", 'f"', "f'", "{"),
    plain("is debug=True safe in production for flask", "no", "not"),
    plain("how big can a sqlite database get", "TB", "terabyte", "281"),
    plain("what does the `with` statement do in python", "context", "close"),
    # workspace requests, natural phrasing
    tool("hey can u check what's on my todo list", {READ: {"path": "todo.md"}}, "milk"),
    tool(
        "is debug turned on?",
        {READ: {"path": "config.yaml"}, "search_files": {"pattern": "debug", "path": ANY_PATH}},
        "false",
        "off",
        "not",
    ),
    tool(
        "which db are we using",
        {READ: {"path": "config.yaml"}, "search_files": {"pattern": "database", "path": ANY_PATH}},
        "sqlite",
        "inventory",
    ),
    tool(
        "what flask version do we pin",
        {
            READ: {"path": "requirements.txt"},
            "search_files": {"pattern": "flask", "path": ANY_PATH},
        },
        "3.0.2",
    ),
    tool(
        "where's the slugify function",
        {"search_files": {"pattern": "slugify", "path": ANY_PATH}},
        "utils",
    ),
    tool(
        "did the server log any errors",
        {READ: {"path": "logs/server.log"}, "search_files": {"pattern": "ERROR", "path": ANY_PATH}},
        "Connection refused",
        "ConnectionRefused",
    ),
    tool(
        "how many people live in bergen according to the data", {READ: {"path": "data.csv"}}, "291"
    ),
    tool("what time's the review meeting", {READ: {"path": "notes.txt"}}, "10:00", "10"),
    tool(
        "gimme the list of files in src",
        {"list_files": {"path": "src"}, "run_shell": {"command": "ls"}},
        "app.py",
    ),
    tool(
        "what's the threshold set to in my notebook",
        {"describe_variable": {"name": "threshold"}, "list_notebook_variables": {}},
        "100",
    ),
    tool(
        "how many rows does big have",
        {"describe_variable": {"name": "big"}, "run_code": {"code": "big"}},
        "2",
    ),
    tool("why did my last cell blow up", {"last_error": {}}, "KeyError", "discount"),
    tool(
        "what columns are in the sales frame", {"describe_variable": {"name": "sales"}}, "revenue"
    ),
    tool(
        "which port does the app listen on",
        {READ: {"path": "config.yaml"}, "search_files": {"pattern": "port", "path": ANY_PATH}},
        "8042",
    ),
    tool(
        "does the test file actually test anything", {READ: {"path": "tests/test_app.py"}}, "greet"
    ),
    tool(
        "what would cleanup.sh delete? don't run it",
        {READ: {"path": "scripts/cleanup.sh"}},
        "build",
    ),
    tool(
        "whats the total units sold across all regions",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "units"}},
        "505",
    ),
    tool("tell me what the readme says", {READ: {"path": "README.md"}}, "Demo"),
    tool(
        "any TODOs left in the code?",
        {"search_files": {"pattern": "TODO", "path": ANY_PATH}, READ: {"path": "src/app.py"}},
        "farewell",
    ),
    tool(
        "what ip was the database at when it failed",
        {READ: {"path": "logs/server.log"}, "search_files": {"pattern": "10.0", "path": ANY_PATH}},
        "10.0.0.7",
    ),
    tool(
        "which version of requests do we need",
        {
            READ: {"path": "requirements.txt"},
            "search_files": {"pattern": "requests", "path": ANY_PATH},
        },
        "2.31",
    ),
    tool(
        "don't change anything, just tell me what greet returns",
        {READ: {"path": "src/app.py"}, "search_files": {"pattern": "greet", "path": ANY_PATH}},
        "Hello",
    ),
    tool(
        "and whats in the tests folder?",
        {"list_files": {"path": "tests"}, "run_shell": {"command": "ls"}},
        "test_app",
        before=("what's in src",),
    ),
    tool(
        "can you figure out the average price in sales",
        {"describe_variable": {"name": "sales"}, "run_code": {"code": "price"}},
        "10.9",
    ),
    tool("whats the smallest city in the csv", {READ: {"path": "data.csv"}}, "Trondheim"),
    tool(
        "is there anything about a database in the logs",
        {
            READ: {"path": "logs/server.log"},
            "search_files": {"pattern": "database", "path": ANY_PATH},
        },
        "10.0.0.7",
        "refused",
    ),
)
