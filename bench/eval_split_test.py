"""The test split of the default-model eval: prompts written the way people actually type to a
notebook chat assistant (terse or chatty, lowercase, typos, indirect asks, follow-ups).

It was written and committed before anything in nbchat was tuned against it, by someone who had
not read the product's rules or the dev split, and it must never be tuned on: no prompt rule,
keyword list or example in `nbchat/` may be shaped by these cases, and a failure here is fixed in
the product only if the same failure shows on the dev split. Its figures are reported first.

Nobody changes a case here, with one exception: a case that is wrong about the workspace or the
notebook (`FILES`, `NOTEBOOK_CELLS` in eval_cases.py), e.g. a fact the tool result cannot hold or
a path that does not exist, may be corrected, and the commit says which case and why. Adding,
dropping or rewording cases to move a score is not allowed; write a new split instead.
"""

from __future__ import annotations

from eval_cases import Case, plain, tool

CASES: tuple[Case, ...] = (
    # --- Plain knowledge: no tool, a fact in the answer. ---
    plain("whats teh capital of australia", "Canberra"),
    plain("How many bones does an adult human have?", "206"),
    plain("who wrote pride and prejudice", "Austen"),
    plain("Which element has the symbol Fe?", "iron"),
    plain("what year did the berlin wall fall", "1989"),
    plain("boiling point of water in fahrenheit?", "212"),
    plain("Which planet is closest to the sun?", "Mercury"),
    plain("biggest ocean on earth?", "Pacific"),
    plain("Sorry if this is a silly one, but who painted the Mona Lisa?", "Leonardo", "Vinci"),
    plain("what does CPU stand for", "central processing unit"),
    plain("longest river in south america", "Amazon"),
    # --- Arithmetic. ---
    plain("what's 48 times 12", "576"),
    plain("multipy 37 by 29 pls", "1073", "1,073"),
    plain("How much is 63 x 47?", "2961", "2,961"),
    plain("86*14", "1204", "1,204"),
    plain("whats 15% of 240", "36"),
    plain("1024 / 16 = ?", "64"),
    plain("quick sanity check: 256 + 389 is what", "645"),
    plain("square root of 169", "13"),
    plain(
        "I've got 3 boxes with 125 items in each and I sold 80 items. How many do I have left?",
        "295",
    ),
    # --- Coding how-to: general, no look at the workspace. ---
    plain("how do i drop rows with missing values in a pandas dataframe", "dropna"),
    plain("What's the actual difference between a list and a tuple in Python?", "mutable"),
    plain("I committed too early. how do I undo the last git commit but keep my changes?", "reset"),
    plain("sql query to count how many rows there are per category?", "group by"),
    plain("how do i rename a colum in pandas", "rename"),
    plain("python: load a json file into a dict", "json.load"),
    plain("git merge vs git rebase, what's the difference in plain words?", "history"),
    plain("How do you reverse a string in Python?", "[::-1]", "reversed"),
    plain("sort a dict by its values", "sorted"),
    plain("In pandas, how would I get the total of one column for each group?", "groupby"),
    plain("SQL: INNER JOIN vs LEFT JOIN?", "null"),
    plain('what is `if __name__ == "__main__":` for? I see it everywhere', "import"),
    plain("regex that matches a string made only of digits", "\\d", "[0-9]"),
    plain("how do I make a virtual environment for a python project", "venv"),
    plain("bash: loop over all the .txt files in a folder", "*.txt"),
    # --- Mentions files, folders, commands or the shell, but is general: no look needed. ---
    plain("what does ls -la actually show me", "hidden", "permission"),
    plain("what's a .gitignore for?", "track", "commit"),
    plain("How do I delete a folder and everything inside it from the terminal?", "rm -r"),
    plain("whats the difference between a file and a directory", "folder", "contain"),
    plain("can you explain what chmod +x does", "execut"),
    plain("What's a requirements.txt file usually used for in Python projects?", "pip install"),
    plain("what does grep -r do", "recursive", "subdirector"),
    plain(
        "on linux, how can I find out which process is holding a port?",
        "lsof",
        "ss -",
        "netstat",
        "fuser",
    ),
    plain("In the shell, what's the difference between > and >>?", "append"),
    plain("what is the #! line at the top of a script called and what's it for", "interpreter"),
    plain("what does cd .. do", "parent", "up one"),
    plain("what do the digits in chmod 755 mean?", "owner"),
    plain("absolute path vs relative path, explain like I'm new to this", "root", "current"),
    # --- Negated or cautious: the user limits what may be done. ---
    tool(
        "don't run it!! but what would scripts/cleanup.sh actually do if I ran it?",
        {"read_file": {"path": "scripts/cleanup.sh"}},
        "build",
        "dist",
    ),
    tool(
        "I don't want you to change anything, just show me what's in config.yaml",
        {"read_file": {"path": "config.yaml"}},
        "8042",
    ),
    plain(
        "Please do NOT run rm -rf build/ yet. I want to go over it with you first: "
        "what exactly would it delete?",
        "build",
    ),
    plain(
        "no need to look at my files, I just want to know how you read a yaml file in python",
        "safe_load",
        "yaml.load",
    ),
    plain("dont open the csv. what's the pandas function to read one, again?", "read_csv"),
    plain(
        "I'm not asking you to install it, just tell me the pip command for requests",
        "pip install requests",
    ),
    plain(
        "Without looking at my project: how would you usually lay out a small flask app?",
        "route",
        "templates",
        "Flask(",
    ),
    # --- Workspace questions. ---
    tool(
        "waht port does the server listen on?",
        {
            "read_file": {"path": "config.yaml"},
            "search_files": {"pattern": "port"},
            "run_shell": {"command": "config"},
        },
        "8042",
    ),
    tool(
        "which flask version are we pinned to?",
        {"read_file": {"path": "requirements.txt"}, "search_files": {"pattern": "flask"}},
        "3.0.2",
    ),
    tool(
        "is there anything still open in todo.md?",
        {"read_file": {"path": "todo.md"}},
        "milk",
        "domain",
        "release notes",
    ),
    tool(
        "wher is slugify defined",
        {"search_files": {"pattern": "slugify"}, "run_shell": {"command": "slugify"}},
        "utils.py",
    ),
    tool(
        "Are there any TODO comments left in the code?",
        {"search_files": {"pattern": "TODO"}, "run_shell": {"command": "TODO"}},
        "farewell",
        "app.py",
    ),
    tool(
        "which city in data.csv has the most people?",
        {"read_file": {"path": "data.csv"}},
        "Oslo",
    ),
    tool(
        "What do the tests actually check?",
        {
            "read_file": {"path": "tests/test_app.py"},
            "list_files": {"path": "tests"},
            "search_files": {"pattern": "def test"},
        },
        "greet",
    ),
    tool(
        "is there a readme in here? what does it say",
        {"read_file": {"path": "README.md"}},
        "Demo project",
        "tiny",
    ),
    tool(
        "What database is this project configured to use?",
        {"read_file": {"path": "config.yaml"}, "search_files": {"pattern": "database"}},
        "inventory.db",
        "sqlite",
    ),
    tool("pythn version on this machine?", {"run_shell": {"command": "python"}}),
    tool("hey, is pandas even installed here?", {"run_shell": {"command": "pandas"}}),
    tool("how much free disk space do I have left", {"run_shell": {"command": "df"}}),
    tool("which directory am I in right now?", {"run_shell": {}}),
    tool(
        "how many cities are listed in data.csv",
        {"read_file": {"path": "data.csv"}, "run_shell": {"command": "data.csv"}},
        "3",
        "three",
    ),
    # --- Workspace imperatives. ---
    tool(
        "shwo me the server log",
        {"read_file": {"path": "logs/server.log"}, "run_shell": {"command": "server.log"}},
        "Connection refused",
        "ERROR",
    ),
    tool(
        "list everything in src",
        {"list_files": {"path": "src"}, "run_shell": {"command": "src"}},
        "utils.py",
    ),
    tool("Open requirements.txt.", {"read_file": {"path": "requirements.txt"}}, "pandas"),
    tool(
        "Find every file that mentions greet",
        {"search_files": {"pattern": "greet"}, "run_shell": {"command": "greet"}},
        "test_app.py",
    ),
    tool(
        "read src/utils.py and explain what area() computes",
        {"read_file": {"path": "src/utils.py"}},
        "radius",
        "circle",
        "pi",
    ),
    tool(
        "grep the logs for errors",
        {
            "search_files": {"pattern": "error"},
            "read_file": {"path": "logs/server.log"},
            "run_shell": {"command": "error"},
        },
        "Connection refused",
        "Errno 111",
        "10.0.0.7",
    ),
    tool("Summarize notes.txt for me please", {"read_file": {"path": "notes.txt"}}, "Thursday"),
    tool(
        "list the files in this project",
        {"list_files": {}, "run_shell": {"command": "ls"}},
        "README.md",
        "config.yaml",
    ),
    tool(
        "print out the cleanup script",
        {"read_file": {"path": "scripts/cleanup.sh"}, "run_shell": {"command": "cleanup.sh"}},
        "rm -rf",
    ),
    tool("tell me what's in the config", {"read_file": {"path": "config.yaml"}}, "8042"),
    # --- Indirect asks. ---
    tool(
        "I wonder what's in the logs folder",
        {
            "list_files": {"path": "logs"},
            "read_file": {"path": "logs/server.log"},
            "run_shell": {"command": "logs"},
        },
        "server.log",
    ),
    tool("could you take a look at app.py?", {"read_file": {"path": "src/app.py"}}, "greet"),
    tool(
        "not sure where greet lives tbh",
        {"search_files": {"pattern": "greet"}, "run_shell": {"command": "greet"}},
        "app.py",
    ),
    tool(
        "I'm getting a weird error in the server, something about not being able to connect. "
        "Any idea what's going on?",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {},
            "list_files": {"path": "logs"},
            "run_shell": {"command": "server.log"},
        },
        "10.0.0.7",
        "5432",
        "Connection refused",
    ),
    tool(
        "would be good to know what packages this thing depends on",
        {"read_file": {"path": "requirements.txt"}},
        "flask",
    ),
    tool(
        "i think one of the files mentions a meeting? can't remember when it is",
        {"search_files": {}, "read_file": {"path": "notes.txt"}},
        "Thursday",
        "B12",
    ),
    tool(
        "My coworker said there's a todo list in here somewhere, mind checking what's on it?",
        {
            "read_file": {"path": "todo.md"},
            "list_files": {},
            "search_files": {"pattern": "todo"},
        },
        "milk",
        "domain",
        "release notes",
    ),
    tool(
        "curious whether the tests cover slugify at all",
        {
            "read_file": {"path": "tests/test_app.py"},
            "search_files": {"pattern": "slugify"},
            "list_files": {"path": "tests"},
        },
    ),
    # --- Follow-ups: earlier messages of the same session in `before`. ---
    plain("and when was he born?", "1564", before=("who wrote hamlet?",)),
    plain("ok now add 56 to that", "200", before=("what's 12 times 12?",)),
    plain(
        "and if I only want the first 5 rows?",
        "head",
        before=("how do I read a csv with pandas?",),
    ),
    plain(
        "thanks, that makes sense",
        before=("what's the difference between git pull and git fetch?",),
    ),
    plain(
        "what's the total population of those three cities?",
        "1212000",
        "1,212,000",
        "1 212 000",
        "1.212",
        before=("what's in data.csv?",),
    ),
    tool(
        "ok, open the utils one",
        {"read_file": {"path": "src/utils.py"}},
        "slugify",
        "area",
        before=("what files are in src?",),
    ),
    tool(
        "does that port show up in the server log too?",
        {
            "read_file": {"path": "logs/server.log"},
            "search_files": {"pattern": "8042"},
            "run_shell": {"command": "server.log"},
        },
        "starting",
        before=("what's in config.yaml?",),
    ),
    tool(
        "which version of flask is in the requirements?",
        {"read_file": {"path": "requirements.txt"}, "search_files": {"pattern": "flask"}},
        "3.0.2",
        before=("hi! I'm working on the flask server today",),
    ),
    tool(
        "is it in my data.csv? what's the population there",
        {"read_file": {"path": "data.csv"}, "search_files": {"pattern": "oslo"}},
        "709",
        before=("whats the capital of norway",),
    ),
    # --- The live notebook. ---
    tool(
        "what variables do I have in my notebook right now?",
        {"list_notebook_variables": {}},
        "sales",
        "threshold",
    ),
    tool("what's in sales?", {"describe_variable": {"name": "sales"}}, "north", "region"),
    tool("why did my lst cell fail", {"last_error": {}}, "discount"),
    tool("What did cell 3 do?", {"read_cell": {"number": "3"}}, "revenue"),
    tool(
        "which region sold the most units?",
        {"describe_variable": {"name": "sales"}, "read_cell": {"number": "2"}},
        "east",
    ),
    tool("hmm I got a KeyError, what's up with that", {"last_error": {}}, "discount"),
    tool(
        "what's threshold set to?",
        {"describe_variable": {"name": "threshold"}, "read_cell": {"number": "4"}},
        "100",
    ),
    tool("how many rows ended up in big", {"describe_variable": {"name": "big"}}, "2", "two"),
    tool("can u show me what I ran in cell 4", {"read_cell": {"number": "4"}}, "threshold"),
    tool(
        "What's the revenue for the east region in my dataframe?",
        {"describe_variable": {"name": "sales"}},
        "1740",
        "1,740",
    ),
    tool(
        "the last thing I ran blew up, can you see why?",
        {"last_error": {}, "read_cell": {"number": "5"}},
        "discount",
    ),
    # --- Small talk. ---
    plain("hello!"),
    plain("cheers, that's all for now"),
    # --- Acting on the notebook (issue 23): written by the engineer who built those tools,
    # before anyone tuned the default path for them; added after the split above was frozen,
    # never tuned on. ---
    tool("stick df.describe() in a cell below", {"insert_cell": {"source": "describe"}}),
    tool(
        "go ahead and execute it",
        {"run_code": {}, "run_cell": {}},
        before=("write a line that prints the mean price in sales",),
    ),
    tool("fix the typo in cell 2, it says pritn", {"edit_cell": {"new": "print"}}),
    tool("run cell 5 again", {"run_cell": {"cell": "5"}}),
    tool("did i change any cells since running them", {"list_cells": {}}),
    plain("whats the shortcut to insert a cell above in jupyter", "a"),
)
