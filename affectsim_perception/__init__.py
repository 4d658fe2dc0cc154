"""What the observer sees (person detector, pose, emotion recognizers).

Empty until the perception issue; the layout is fixed by DESIGN.md section 1.
"""
