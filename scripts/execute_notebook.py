#!/usr/bin/python3
"""Executes a notebook in place with nbclient, as `jupyter nbconvert --execute --inplace` does,
but able to run widget cells with Debian 12's packages.

Why not nbconvert itself: Debian 12 ships ipywidgets 6, which speaks widget protocol 1 (a
comm_open's data *is* the model's state), and nbclient 0.7, which reads only protocol 2 (the
state under data["state"]) and stops with KeyError: 'state' at the first widget, on any kernel
(ipykernel too). Here a protocol-1 widget is left to the frontend that is not there, as nbclient
leaves every model it does not mimic; the cell's own outputs are kept as usual.

    /usr/bin/python3 scripts/execute_notebook.py --kernel belljar --timeout 300 walkthrough.ipynb
"""
import argparse
import os
import sys

import nbclient
import nbformat


class NotebookClient(nbclient.NotebookClient):
    """nbclient's client, reading widget protocol 1 (ipywidgets 6) as well as 2."""

    def on_comm_open_jupyter_widget(self, msg):
        if "state" not in msg["content"]["data"]:
            return None  # protocol 1: no model nbclient mimics
        return super().on_comm_open_jupyter_widget(msg)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", help="the .ipynb file, rewritten with its outputs")
    parser.add_argument("--kernel", required=True, help="the kernelspec's name")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a cell may take")
    args = parser.parse_args(argv)
    nb = nbformat.read(args.notebook, as_version=4)
    workdir = os.path.dirname(os.path.abspath(args.notebook))
    client = NotebookClient(nb, kernel_name=args.kernel, timeout=args.timeout,
                            resources={"metadata": {"path": workdir}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, args.notebook)  # what ran, also when a cell failed
    return 0


if __name__ == "__main__":
    sys.exit(main())
