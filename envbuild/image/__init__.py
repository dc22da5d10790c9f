"""What happens to a built context on a Docker Engine: build it (engine), run the smoke step in it
(verify), label, tag and push it when the step passed (promote).
"""
